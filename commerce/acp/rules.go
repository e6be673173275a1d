package acp

// The schemas of ACP 2026-04-17, transcribed from the protocol's JSON
// Schema bundles (spec/2026-04-17/json-schema/schema.agentic_checkout.json
// and schema.delegate_payment.json). Each variable is named after its
// $defs entry. The tests check these rules against the bundles themselves
// with an independent validator, on the curated examples and on mutations
// of them.
//
// Where the bundle and the OpenAPI file of the same version differ, the
// bundle is followed: it is a superset (Address.company, Order
// .client_reference_id, order_notes, Error.supported_versions,
// PaymentHandler.display_order) and, unlike the OpenAPI file, it lets a
// completed session carry its order (the OpenAPI CheckoutSessionWithOrder
// is allOf a closed CheckoutSessionBase without "order" and an object that
// requires it: nothing satisfies it).

var (
	isoDate  = pattern(`^\d{4}-\d{2}-\d{2}$`)
	currency = pattern(`^[a-z]{3}$`)

	severity    = str(enum("info", "low", "medium", "high", "critical"))
	resolution  = str(enum("recoverable", "requires_buyer_input", "requires_buyer_review"))
	contentType = str(enum("plain", "markdown"))
	strs        = array(str())
	uris        = array(str(uri))
)

var ruleAddress = object(objSpec{
	props: props{
		"name": str(), "line_one": str(), "line_two": str(), "city": str(), "state": str(),
		"country": str(), "postal_code": str(), "company": str(),
	},
	required: []string{"name", "line_one", "city", "state", "country", "postal_code"},
})

var ruleAffiliateAttribution = object(objSpec{
	props: props{
		"provider": str(), "token": str(), "publisher_id": str(), "campaign_id": str(),
		"creative_id": str(), "sub_id": str(),
		"source": object(objSpec{
			props:    props{"type": str(enum("url", "platform", "unknown")), "url": str(uri)},
			required: []string{"type"},
		}),
		"issued_at":  str(dateTime),
		"expires_at": str(dateTime),
		"metadata":   object(objSpec{extra: oneOf(str(), anyNumber, boolean)}),
		"touchpoint": str(enum("first", "last")),
	},
	required:      []string{"provider"},
	extra:         anything, // "Servers SHOULD ignore unknown fields"
	anyOfRequired: [][]string{{"token"}, {"publisher_id"}},
})

var ruleFulfillmentDetails = object(objSpec{
	props: props{"name": str(), "phone_number": str(), "email": str(email), "address": ruleAddress},
})

var ruleBuyer = object(objSpec{
	props: props{
		"first_name": str(), "last_name": str(), "full_name": str(), "email": str(email),
		"phone_number": str(), "customer_id": str(),
		"account_type":          str(enum("guest", "registered", "business")),
		"authentication_status": str(enum("authenticated", "guest", "requires_signin")),
		"company": object(objSpec{
			props:    props{"name": str(), "tax_id": str(), "department": str(), "cost_center": str()},
			required: []string{"name"},
		}),
		"loyalty": object(objSpec{
			props: props{"tier": str(), "points_balance": integer(), "member_since": str(dateTime)},
		}),
		"tax_exemption": object(objSpec{
			props: props{
				"certificate_id":   str(),
				"certificate_type": str(enum("resale", "exempt_organization", "government")),
				"exempt_regions":   strs,
				"expires_at":       str(dateTime),
			},
			required: []string{"certificate_id", "certificate_type"},
		}),
	},
	required: []string{"email"},
})

var ruleInterventionCapabilities = object(objSpec{
	props: props{
		"supported":             array(str(enum("3ds", "biometric", "address_verification"))),
		"required":              array(str(enum("3ds", "biometric"))),
		"enforcement":           str(enum("always", "conditional", "optional")),
		"display_context":       str(enum("native", "webview", "modal", "redirect")),
		"redirect_context":      str(enum("in_app", "external_browser", "none")),
		"max_redirects":         integer(0),
		"max_interaction_depth": integer(1),
	},
})

var ruleExtensionDeclaration = object(objSpec{
	props: props{
		"name":    str(pattern(`^[a-z][a-z0-9_-]*(@\d{4}-\d{2}-\d{2})?$|^[a-z][a-z0-9]*(?:\.[a-z][a-z0-9_-]*)+(@\d{4}-\d{2}-\d{2})?$`)),
		"extends": array(str(pattern(`^\$\.[A-Za-z][A-Za-z0-9]*(\.[A-Za-z][A-Za-z0-9_]*)*$`)), arrOpt{unique: true}),
		"schema":  str(uri),
		"spec":    str(uri),
	},
	required: []string{"name"},
})

var rulePaymentHandler = object(objSpec{
	props: props{
		"id": str(), "name": str(), "display_name": str(), "version": str(isoDate),
		"spec": str(uri), "requires_delegate_payment": boolean, "requires_pci_compliance": boolean,
		"psp": str(), "config_schema": str(uri), "instrument_schemas": uris,
		"config":        object(objSpec{extra: anything}),
		"display_order": integer(),
	},
	required: []string{"id", "name", "version", "spec", "requires_delegate_payment",
		"requires_pci_compliance", "psp", "config_schema", "instrument_schemas", "config"},
})

var ruleCapabilities = object(objSpec{
	props: props{
		"payment": object(objSpec{
			props:    props{"handlers": array(rulePaymentHandler)},
			required: []string{"handlers"},
		}),
		"interventions": ruleInterventionCapabilities,
		// An empty array matches both alternatives, so oneOf refuses it.
		"extensions": oneOf(
			array(str(), arrOpt{unique: true}),
			array(ruleExtensionDeclaration, arrOpt{unique: true}),
		),
	},
})

var ruleItem = object(objSpec{
	props:    props{"id": str(), "name": str(), "unit_amount": integer()},
	required: []string{"id"},
})

var ruleTotal = object(objSpec{
	props: props{
		"type": str(enum("items_base_amount", "items_discount", "subtotal", "discount", "fulfillment",
			"tax", "fee", "gift_wrap", "tip", "store_credit", "total", "amount_refunded")),
		"display_text":       str(),
		"amount":             integer(),
		"presentment_amount": integer(),
		"description":        str(),
		"breakdown": array(object(objSpec{
			props:    props{"jurisdiction": str(), "rate": anyNumber, "amount": integer()},
			required: []string{"jurisdiction", "rate", "amount"},
		})),
	},
	required: []string{"type", "display_text", "amount"},
})

var totals = array(ruleTotal)

var ruleLineItem = object(objSpec{
	props: props{
		"id": str(), "item": ruleItem, "quantity": integer(1), "name": str(), "description": str(),
		"images": uris, "unit_amount": integer(),
		"disclosures": array(object(objSpec{
			props:    props{"type": str(enum("disclaimer")), "content_type": contentType, "content": str()},
			required: []string{"type", "content_type", "content"},
		})),
		"custom_attributes": array(object(objSpec{
			props:    props{"display_name": str(), "value": str()},
			required: []string{"display_name", "value"},
		})),
		"marketplace_seller_details": object(objSpec{props: props{"name": str()}, required: []string{"name"}}),
		"product_id":                 str(), "sku": str(), "variant_id": str(), "category": str(), "tags": strs,
		"weight": object(objSpec{
			props:    props{"value": anyNumber, "unit": str(enum("g", "kg", "oz", "lb"))},
			required: []string{"value", "unit"},
		}),
		"dimensions": object(objSpec{
			props:    props{"length": anyNumber, "width": anyNumber, "height": anyNumber, "unit": str(enum("cm", "in"))},
			required: []string{"length", "width", "height", "unit"},
		}),
		"availability_status":    str(enum("in_stock", "low_stock", "out_of_stock", "backorder", "pre_order")),
		"available_quantity":     integer(0),
		"max_quantity_per_order": integer(1),
		"fulfillable_on":         str(dateTime),
		"variant_options": array(object(objSpec{
			props:    props{"name": str(), "value": str()},
			required: []string{"name", "value"},
		})),
		"discount_details": array(object(objSpec{
			props: props{
				"code": str(), "type": str(enum("percentage", "fixed", "bogo", "volume")),
				"amount": integer(), "description": str(),
				"source": str(enum("coupon", "automatic", "loyalty")),
			},
			required: []string{"type", "amount"},
		})),
		"tax_exempt": boolean, "tax_exemption_reason": str(), "parent_id": str(),
		"totals": totals,
	},
	required: []string{"id", "item", "quantity", "totals"},
})

var ruleFulfillmentOption = discriminated("type", map[string]rule{
	"shipping": object(objSpec{
		props: props{
			"type": str(constant("shipping")), "id": str(), "title": str(), "description": str(),
			"carrier": str(), "earliest_delivery_time": str(dateTime), "latest_delivery_time": str(dateTime),
			"totals": totals,
		},
		required: []string{"type", "id", "title", "totals"},
	}),
	"digital": object(objSpec{
		props: props{
			"type": str(constant("digital")), "id": str(), "title": str(), "description": str(),
			"totals": totals,
		},
		required: []string{"type", "id", "title", "totals"},
	}),
	"pickup": object(objSpec{
		props: props{
			"type": str(constant("pickup")), "id": str(), "title": str(), "description": str(),
			"location": object(objSpec{
				props:    props{"name": str(), "address": ruleAddress, "phone": str(), "instructions": str()},
				required: []string{"name", "address"},
				extra:    anything,
			}),
			"pickup_type": str(enum("in_store", "curbside", "locker")),
			"ready_by":    str(dateTime), "pickup_by": str(dateTime),
			"totals": totals,
		},
		required: []string{"type", "id", "title", "location", "totals"},
	}),
	"local_delivery": object(objSpec{
		props: props{
			"type": str(constant("local_delivery")), "id": str(), "title": str(), "description": str(),
			"delivery_window": object(objSpec{
				props:    props{"start": str(dateTime), "end": str(dateTime)},
				required: []string{"start", "end"},
				extra:    anything,
			}),
			"service_area": object(objSpec{
				props: props{"radius_miles": anyNumber, "center_postal_code": str()},
				extra: anything,
			}),
			"totals": totals,
		},
		required: []string{"type", "id", "title", "totals"},
	}),
})

var ruleSelectedFulfillmentOption = object(objSpec{
	props: props{
		"type":      str(enum("shipping", "digital", "pickup", "local_delivery")),
		"option_id": str(), "item_ids": strs,
	},
	required: []string{"type", "option_id", "item_ids"},
})

var ruleFulfillmentGroup = object(objSpec{
	props: props{
		"id": str(), "item_ids": strs,
		"destination_type":    str(enum("shipping", "pickup", "local_delivery", "digital")),
		"fulfillment_details": ruleFulfillmentDetails,
		"location_id":         str(), "instructions": str(),
	},
	required: []string{"id", "item_ids", "destination_type"},
})

func message(typ string, code strCheck) rule {
	p := props{
		"type": str(constant(typ)), "severity": severity, "resolution": resolution,
		"param": str(), "content_type": contentType, "content": str(),
	}
	req := []string{"type", "content_type", "content"}
	if code != nil {
		p["code"] = str(code)
		req = []string{"type", "code", "content_type", "content"}
	}
	return object(objSpec{props: p, required: req})
}

var ruleMessage = discriminated("type", map[string]rule{
	"info": message("info", nil),
	"warning": message("warning", enum("low_stock", "high_demand", "shipping_delay", "price_change",
		"expiring_promotion", "limited_availability", "discount_code_expired", "discount_code_invalid",
		"discount_code_already_applied", "discount_code_combination_disallowed",
		"discount_code_minimum_not_met", "discount_code_user_not_logged_in",
		"discount_code_user_ineligible", "discount_code_usage_limit_reached")),
	"error": message("error", enum("missing", "invalid", "out_of_stock", "payment_declined",
		"requires_sign_in", "requires_3ds", "low_stock", "quantity_exceeded", "coupon_invalid",
		"coupon_expired", "minimum_not_met", "maximum_exceeded", "region_restricted",
		"age_verification_required", "approval_required", "unsupported", "not_found", "conflict",
		"rate_limited", "expired", "intervention_required")),
})

var ruleLink = object(objSpec{
	props: props{
		"type": str(enum("terms_of_use", "privacy_policy", "return_policy", "shipping_policy",
			"contact_us", "about_us", "faq", "support")),
		"title": str(), "url": str(uri),
	},
	required: []string{"type", "url"},
})

var ruleAuthenticationMetadata = object(objSpec{
	props: props{
		"acquirer_details": object(objSpec{
			props: props{
				"acquirer_bin": str(maxLen(11)), "acquirer_country": str(minLen(2), maxLen(2)),
				"acquirer_merchant_id": str(maxLen(35)), "merchant_name": str(maxLen(40)),
				"requestor_id": str(maxLen(35)),
			},
			required: []string{"acquirer_bin", "acquirer_country", "acquirer_merchant_id", "merchant_name"},
		}),
		"directory_server": str(enum("american_express", "mastercard", "visa")),
		"flow_preference": object(objSpec{
			props: props{
				"type":         str(enum("challenge", "frictionless")),
				"challenge":    object(objSpec{props: props{"type": str(enum("mandated", "preferred"))}}),
				"frictionless": object(objSpec{props: props{"type": str(enum("low_risk"))}}),
			},
			required: []string{"type"},
		}),
	},
	required: []string{"acquirer_details", "directory_server"},
	extra:    anything,
})

var ruleEstimatedDelivery = object(objSpec{
	props:    props{"earliest": str(dateTime), "latest": str(dateTime)},
	required: []string{"earliest", "latest"},
})

var ruleLineItemReference = object(objSpec{
	props:    props{"id": str(), "quantity": integer(1)},
	required: []string{"id", "quantity"},
})

var ruleOrder = object(objSpec{
	props: props{
		"type": str(constant("order")), "id": str(), "checkout_session_id": str(),
		"order_number": str(), "client_reference_id": str(), "permalink_url": str(uri),
		"status":             str(),
		"estimated_delivery": ruleEstimatedDelivery,
		"confirmation": object(objSpec{props: props{
			"confirmation_number": str(), "confirmation_email_sent": boolean,
			"receipt_url": str(uri), "invoice_number": str(), "order_notes": str(),
		}}),
		"support": object(objSpec{props: props{
			"email": str(email), "phone": str(), "hours": str(), "help_center_url": str(uri),
		}}),
		"line_items": array(object(objSpec{
			props: props{
				"id": str(), "title": str(), "product_id": str(), "description": str(),
				"image_url": str(uri), "url": str(uri),
				"quantity": object(objSpec{
					props:    props{"ordered": integer(1), "current": integer(0), "fulfilled": integer(0)},
					required: []string{"ordered", "current"},
				}),
				"unit_price": integer(), "subtotal": integer(), "totals": totals, "status": str(),
			},
			required: []string{"id", "title", "quantity"},
		})),
		"fulfillments": array(object(objSpec{
			props: props{
				"id": str(), "type": str(enum("shipping", "pickup", "digital")), "status": str(),
				"line_items": array(ruleLineItemReference),
				"carrier":    str(), "tracking_number": str(), "tracking_url": str(uri),
				"destination": ruleAddress, "estimated_delivery": ruleEstimatedDelivery,
				"digital_delivery": object(objSpec{
					props: props{"access_url": str(uri), "license_key": str(), "expires_at": str(dateTime)},
					extra: anything,
				}),
				"description": str(),
				"events": array(object(objSpec{
					props: props{
						"id": str(), "type": str(), "occurred_at": str(dateTime),
						"description": str(), "location": str(),
					},
					required: []string{"id", "type", "occurred_at"},
				})),
			},
			required: []string{"id", "type"},
		})),
		"adjustments": array(object(objSpec{
			props: props{
				"id": str(), "type": str(), "occurred_at": str(dateTime), "status": str(),
				"line_items": array(ruleLineItemReference), "amount": integer(),
				"currency": str(currency), "description": str(), "reason": str(),
			},
			required: []string{"id", "type", "occurred_at", "status"},
		})),
		"totals": totals,
	},
	required: []string{"id", "checkout_session_id", "permalink_url"},
})

var ruleDiscountsResponse = object(objSpec{
	props: props{
		"codes": strs,
		"applied": array(object(objSpec{
			props: props{
				"id": str(), "code": str(),
				"coupon": object(objSpec{
					props: props{
						"id": str(), "name": str(), "percent_off": number(0, 100),
						"amount_off": integer(0), "currency": str(currency),
						"duration":           str(enum("once", "repeating", "forever")),
						"duration_in_months": integer(1), "max_redemptions": integer(1),
						"times_redeemed": integer(0),
						"metadata":       object(objSpec{extra: str()}),
					},
					required: []string{"id", "name"},
				}),
				"amount": integer(0), "automatic": boolean,
				"start": str(dateTime), "end": str(dateTime),
				"method":   str(enum("each", "across")),
				"priority": integer(1),
				"allocations": array(object(objSpec{
					props:    props{"path": str(), "amount": integer(0)},
					required: []string{"path", "amount"},
				})),
			},
			required: []string{"id", "coupon", "amount"},
		})),
		"rejected": array(object(objSpec{
			props: props{
				"code": str(),
				"reason": str(enum("discount_code_expired", "discount_code_invalid",
					"discount_code_already_applied", "discount_code_combination_disallowed",
					"discount_code_minimum_not_met", "discount_code_user_not_logged_in",
					"discount_code_user_ineligible", "discount_code_usage_limit_reached")),
				"message": str(),
			},
			required: []string{"code", "reason"},
		})),
	},
})

// sessionProps are CheckoutSessionBase's members.
var sessionProps = props{
	"id":           str(),
	"protocol":     object(objSpec{props: props{"version": str(isoDate)}, required: []string{"version"}}),
	"capabilities": ruleCapabilities,
	"buyer":        ruleBuyer,
	"status": str(enum("incomplete", "not_ready_for_payment", "requires_escalation",
		"authentication_required", "ready_for_payment", "pending_approval", "complete_in_progress",
		"completed", "canceled", "in_progress", "expired")),
	"currency": str(), "presentment_currency": str(), "exchange_rate": anyNumber,
	"exchange_rate_timestamp": str(dateTime), "locale": str(), "timezone": str(),
	"line_items":                   array(ruleLineItem),
	"fulfillment_details":          ruleFulfillmentDetails,
	"fulfillment_options":          array(ruleFulfillmentOption),
	"selected_fulfillment_options": array(ruleSelectedFulfillmentOption),
	"fulfillment_groups":           array(ruleFulfillmentGroup),
	"totals":                       totals,
	"messages":                     array(ruleMessage),
	"links":                        array(ruleLink),
	"authentication_metadata":      ruleAuthenticationMetadata,
	"created_at":                   str(dateTime), "updated_at": str(dateTime), "expires_at": str(dateTime),
	"continue_url": str(uri),
	"metadata":     object(objSpec{extra: anything}),
	"quote_id":     str(), "quote_expires_at": str(dateTime),
	"discounts": ruleDiscountsResponse,
	"marketing_consent_options": array(object(objSpec{
		props: props{
			"channel": str(), "display_text": str(), "privacy_policy_url": str(uri),
			"is_subscribed": boolean,
		},
		required: []string{"channel", "display_text", "privacy_policy_url"},
	})),
	"order": ruleOrder,
}

var sessionRequired = []string{"id", "status", "currency", "line_items", "totals",
	"fulfillment_options", "messages", "links", "capabilities"}

// ruleCheckoutSession is CheckoutSession (= CheckoutSessionBase).
var ruleCheckoutSession = object(objSpec{props: sessionProps, required: sessionRequired})

// ruleCheckoutSessionWithOrder is CheckoutSessionWithOrder: the base with
// order required.
var ruleCheckoutSessionWithOrder = object(objSpec{
	props:    sessionProps,
	required: append(append([]string(nil), sessionRequired...), "order"),
})

// ruleError is the checkout API's Error.
var ruleError = object(objSpec{
	props: props{
		"type":               str(enum("invalid_request", "processing_error", "service_unavailable")),
		"code":               str(),
		"message":            str(),
		"param":              str(),
		"supported_versions": array(str(isoDate)),
	},
	required: []string{"type", "code", "message"},
})

// Requests.

var ruleDiscountsRequest = object(objSpec{props: props{"codes": strs}})

var orderNotes = str(maxLen(5000))

var ruleCheckoutSessionCreateRequest = object(objSpec{
	props: props{
		"buyer": ruleBuyer, "line_items": array(ruleItem, arrOpt{min: 1}), "currency": str(),
		"fulfillment_details": ruleFulfillmentDetails, "capabilities": ruleCapabilities,
		"fulfillment_groups":    array(ruleFulfillmentGroup),
		"affiliate_attribution": ruleAffiliateAttribution,
		"coupons":               strs, "discounts": ruleDiscountsRequest,
		"locale": str(), "timezone": str(), "quote_id": str(),
		"metadata":    object(objSpec{extra: anything}),
		"order_notes": orderNotes,
	},
	required: []string{"line_items", "currency", "capabilities"},
})

var ruleCheckoutSessionUpdateRequest = object(objSpec{
	props: props{
		"buyer": ruleBuyer, "line_items": array(ruleItem),
		"fulfillment_details":          ruleFulfillmentDetails,
		"fulfillment_groups":           array(ruleFulfillmentGroup),
		"selected_fulfillment_options": array(ruleSelectedFulfillmentOption),
		"coupons":                      strs, "discounts": ruleDiscountsRequest,
		"order_notes": orderNotes,
	},
})

var rulePaymentData = object(objSpec{
	props: props{
		"handler_id": str(),
		"instrument": object(objSpec{
			props: props{
				"type": str(),
				"credential": object(objSpec{
					props:    props{"type": str(), "token": str()},
					required: []string{"type", "token"},
					extra:    anything,
				}),
			},
			required: []string{"type", "credential"},
			extra:    anything,
		}),
		"billing_address":       ruleAddress,
		"purchase_order_number": str(),
		"payment_terms":         str(enum("immediate", "net_15", "net_30", "net_60", "net_90")),
		"due_date":              str(dateTime),
		"approval_required":     boolean,
	},
	anyOfRequired: [][]string{{"handler_id", "instrument"}, {"purchase_order_number"}},
})

var ruleAuthenticationResult = object(objSpec{
	props: props{
		"outcome": str(enum("abandoned", "attempt_acknowledged", "authenticated", "canceled", "denied",
			"informational", "internal_error", "not_supported", "processing_error", "rejected")),
		"outcome_details": object(objSpec{
			props: props{
				"three_ds_cryptogram":           str(),
				"electronic_commerce_indicator": str(enum("01", "02", "05", "06", "07")),
				"transaction_id":                str(), "version": str(),
			},
			required: []string{"three_ds_cryptogram", "electronic_commerce_indicator", "transaction_id", "version"},
		}),
	},
	required: []string{"outcome"},
	also: func(o *jsonObject, at string) error {
		switch o.vals["outcome"] {
		case "authenticated", "informational", "attempt_acknowledged":
			if _, ok := o.vals["outcome_details"]; !ok {
				return fail(member(at, "outcome_details"), "required member is missing")
			}
		}
		return nil
	},
})

var ruleCheckoutSessionCompleteRequest = object(objSpec{
	props: props{
		"buyer": ruleBuyer, "payment_data": rulePaymentData,
		"authentication_result": ruleAuthenticationResult,
		"affiliate_attribution": ruleAffiliateAttribution,
		"risk_signals": object(objSpec{props: props{
			"ip_address": str(), "user_agent": str(), "accept_language": str(),
			"session_id": str(), "device_fingerprint": str(),
		}}),
		"marketing_consents": array(object(objSpec{
			props:    props{"channel": str(), "opted_in": boolean},
			required: []string{"channel", "opted_in"},
		})),
		"order_notes": orderNotes,
	},
	required: []string{"payment_data"},
})

var ruleCancelSessionRequest = object(objSpec{
	props: props{
		"intent_trace": object(objSpec{
			props: props{
				"reason_code": str(enum("price_sensitivity", "shipping_cost", "shipping_speed", "product_fit",
					"trust_security", "returns_policy", "payment_options", "comparison", "timing_deferred", "other")),
				"trace_summary": str(maxLen(500)),
				"metadata":      object(objSpec{extra: oneOf(str(), anyNumber, boolean)}),
			},
			required: []string{"reason_code"},
			extra:    anything,
		}),
	},
	extra: anything,
})

// Delegate payment (schema.delegate_payment.json).

var ruleDelegateAddress = object(objSpec{
	props: props{
		"name": str(maxLen(256)), "line_one": str(maxLen(60)), "line_two": str(maxLen(60)),
		"city": str(maxLen(60)), "state": str(), "country": str(minLen(2), maxLen(2)),
		"postal_code": str(maxLen(20)),
	},
	required: []string{"name", "line_one", "city", "state", "country", "postal_code"},
})

var stringMap = object(objSpec{extra: str()})

var rulePaymentMethodCard = object(objSpec{
	props: props{
		"type":             str(constant("card")),
		"card_number_type": str(enum("fpan", "network_token")),
		"number":           str(), "exp_month": str(maxLen(2)), "exp_year": str(maxLen(4)),
		"name": str(), "cvc": str(maxLen(4)), "cryptogram": str(), "eci_value": str(maxLen(2)),
		"checks_performed":          array(str(enum("avs", "cvv", "ani", "auth0"))),
		"iin":                       str(maxLen(8)),
		"display_card_funding_type": str(enum("credit", "debit", "prepaid")),
		"display_wallet_type":       str(), "display_brand": str(),
		"display_last4": str(minLen(4), maxLen(4), pattern(`^[0-9]{4}$`)),
		"metadata":      stringMap,
		"virtual":       boolean,
	},
	required: []string{"type", "card_number_type", "number", "display_card_funding_type", "metadata"},
})

var ruleAllowance = object(objSpec{
	props: props{
		"reason": str(enum("one_time")), "max_amount": integer(), "currency": str(currency),
		"checkout_session_id": str(), "merchant_id": str(maxLen(256)), "expires_at": str(dateTime),
	},
	required: []string{"reason", "max_amount", "currency", "checkout_session_id", "merchant_id", "expires_at"},
})

var ruleDelegatePaymentRequest = object(objSpec{
	props: props{
		"payment_method":  rulePaymentMethodCard,
		"allowance":       ruleAllowance,
		"billing_address": ruleDelegateAddress,
		"risk_signals": array(object(objSpec{
			props: props{
				"type": str(enum("card_testing")), "score": integer(),
				"action": str(enum("blocked", "manual_review", "authorized")),
			},
			required: []string{"type", "score", "action"},
		})),
		"metadata": stringMap,
	},
	required: []string{"payment_method", "allowance", "risk_signals", "metadata"},
})

var ruleDelegatePaymentResponse = object(objSpec{
	props:    props{"id": str(), "created": str(dateTime), "metadata": stringMap},
	required: []string{"id", "created", "metadata"},
})

var ruleDelegateError = object(objSpec{
	props: props{
		"type": str(enum("invalid_request", "rate_limit_exceeded", "processing_error", "service_unavailable")),
		"code": str(enum("invalid_card", "duplicate_request", "idempotency_conflict", "too_many_requests",
			"idempotency_key_required", "idempotency_in_flight")),
		"message": str(), "param": str(),
		"supported_versions": array(str(isoDate)),
	},
	required: []string{"type", "code", "message"},
})
