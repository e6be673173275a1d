package acp

import (
	"encoding/json"
	"errors"
)

// Wire types of the checkout API (openapi.agentic_checkout.yaml), named
// after the schemas. Required members have no omitempty; money is in
// minor units (int64); timestamps are kept as the RFC 3339 text the
// merchant sent. Decode them with the Parse functions, which check the
// schema first: json.Unmarshal alone checks nothing.

// Address is a physical address (shipping, billing, pickup).
type Address struct {
	Name       string `json:"name"`
	LineOne    string `json:"line_one"`
	LineTwo    string `json:"line_two,omitempty"`
	City       string `json:"city"`
	State      string `json:"state"`
	Country    string `json:"country"`
	PostalCode string `json:"postal_code"`
	Company    string `json:"company,omitempty"`
}

// FulfillmentDetails are the buyer's fulfilment contact and address.
type FulfillmentDetails struct {
	Name        string   `json:"name,omitempty"`
	PhoneNumber string   `json:"phone_number,omitempty"`
	Email       string   `json:"email,omitempty"`
	Address     *Address `json:"address,omitempty"`
}

// CompanyInfo is a business buyer's company.
type CompanyInfo struct {
	Name       string `json:"name"`
	TaxID      string `json:"tax_id,omitempty"`
	Department string `json:"department,omitempty"`
	CostCenter string `json:"cost_center,omitempty"`
}

// LoyaltyInfo is the buyer's loyalty programme membership.
type LoyaltyInfo struct {
	Tier          string `json:"tier,omitempty"`
	PointsBalance int64  `json:"points_balance,omitempty"`
	MemberSince   string `json:"member_since,omitempty"`
}

// TaxExemption is the buyer's tax exemption certificate.
type TaxExemption struct {
	CertificateID   string   `json:"certificate_id"`
	CertificateType string   `json:"certificate_type"`
	ExemptRegions   []string `json:"exempt_regions,omitempty"`
	ExpiresAt       string   `json:"expires_at,omitempty"`
}

// Buyer is the buyer; email is required.
type Buyer struct {
	FirstName            string        `json:"first_name,omitempty"`
	LastName             string        `json:"last_name,omitempty"`
	FullName             string        `json:"full_name,omitempty"`
	Email                string        `json:"email"`
	PhoneNumber          string        `json:"phone_number,omitempty"`
	CustomerID           string        `json:"customer_id,omitempty"`
	AccountType          string        `json:"account_type,omitempty"`
	AuthenticationStatus string        `json:"authentication_status,omitempty"`
	Company              *CompanyInfo  `json:"company,omitempty"`
	Loyalty              *LoyaltyInfo  `json:"loyalty,omitempty"`
	TaxExemption         *TaxExemption `json:"tax_exemption,omitempty"`
}

// InterventionCapabilities are the interventions (3-D Secure, ...) a party
// handles.
type InterventionCapabilities struct {
	Supported           []string `json:"supported,omitempty"`
	Required            []string `json:"required,omitempty"`
	Enforcement         string   `json:"enforcement,omitempty"`
	DisplayContext      string   `json:"display_context,omitempty"`
	RedirectContext     string   `json:"redirect_context,omitempty"`
	MaxRedirects        *int64   `json:"max_redirects,omitempty"`
	MaxInteractionDepth int64    `json:"max_interaction_depth,omitempty"`
}

// ExtensionDeclaration is an active extension in a seller's capabilities.
type ExtensionDeclaration struct {
	Name    string   `json:"name"`
	Extends []string `json:"extends,omitempty"`
	Schema  string   `json:"schema,omitempty"`
	Spec    string   `json:"spec,omitempty"`
}

// Extensions is Capabilities.extensions: identifiers in an agent's request,
// declarations in a seller's response. Exactly one of the two is set.
type Extensions struct {
	Names        []string
	Declarations []ExtensionDeclaration
}

// MarshalJSON writes whichever form is set.
func (e Extensions) MarshalJSON() ([]byte, error) {
	if e.Declarations != nil {
		return json.Marshal(e.Declarations)
	}
	if e.Names == nil {
		return []byte("[]"), nil
	}
	return json.Marshal(e.Names)
}

// UnmarshalJSON reads either form.
func (e *Extensions) UnmarshalJSON(b []byte) error {
	var raw []json.RawMessage
	if err := json.Unmarshal(b, &raw); err != nil {
		return err
	}
	*e = Extensions{}
	if len(raw) == 0 {
		e.Names = []string{}
		return nil
	}
	if len(raw[0]) > 0 && raw[0][0] == '"' {
		return json.Unmarshal(b, &e.Names)
	}
	if len(raw[0]) > 0 && raw[0][0] == '{' {
		return json.Unmarshal(b, &e.Declarations)
	}
	return errors.New("acp: extensions are neither identifiers nor declarations")
}

// PaymentHandler is a payment handler the seller offers.
type PaymentHandler struct {
	ID                      string          `json:"id"`
	Name                    string          `json:"name"`
	DisplayName             string          `json:"display_name,omitempty"`
	Version                 string          `json:"version"`
	Spec                    string          `json:"spec"`
	RequiresDelegatePayment bool            `json:"requires_delegate_payment"`
	RequiresPCICompliance   bool            `json:"requires_pci_compliance"`
	PSP                     string          `json:"psp"`
	ConfigSchema            string          `json:"config_schema"`
	InstrumentSchemas       []string        `json:"instrument_schemas"`
	Config                  json.RawMessage `json:"config"`
	DisplayOrder            *int64          `json:"display_order,omitempty"`
}

// PaymentCapability is Capabilities.payment (the schema's Payment).
type PaymentCapability struct {
	Handlers []PaymentHandler `json:"handlers"`
}

// Capabilities are a party's capabilities: the agent's in requests, the
// seller's (the negotiated intersection) in responses.
type Capabilities struct {
	Payment       *PaymentCapability        `json:"payment,omitempty"`
	Interventions *InterventionCapabilities `json:"interventions,omitempty"`
	Extensions    *Extensions               `json:"extensions,omitempty"`
}

// Item is a purchasable item. The schema has no quantity: a request asks
// for n of an item by listing it n times.
type Item struct {
	ID         string `json:"id"`
	Name       string `json:"name,omitempty"`
	UnitAmount *int64 `json:"unit_amount,omitempty"`
}

// TaxBreakdownItem is one jurisdiction's part of a tax total.
type TaxBreakdownItem struct {
	Jurisdiction string  `json:"jurisdiction"`
	Rate         float64 `json:"rate"`
	Amount       int64   `json:"amount"`
}

// Total types.
const (
	TotalItemsBaseAmount = "items_base_amount"
	TotalItemsDiscount   = "items_discount"
	TotalSubtotal        = "subtotal"
	TotalDiscount        = "discount"
	TotalFulfillment     = "fulfillment"
	TotalTax             = "tax"
	TotalFee             = "fee"
	TotalGiftWrap        = "gift_wrap"
	TotalTip             = "tip"
	TotalStoreCredit     = "store_credit"
	TotalTotal           = "total"
	TotalAmountRefunded  = "amount_refunded"
)

// Total is one line of a totals breakdown.
type Total struct {
	Type              string             `json:"type"`
	DisplayText       string             `json:"display_text"`
	Amount            int64              `json:"amount"`
	PresentmentAmount *int64             `json:"presentment_amount,omitempty"`
	Description       string             `json:"description,omitempty"`
	Breakdown         []TaxBreakdownItem `json:"breakdown,omitempty"`
}

// Disclosure is a legal disclosure on a line item.
type Disclosure struct {
	Type        string `json:"type"`
	ContentType string `json:"content_type"`
	Content     string `json:"content"`
}

// CustomAttribute is a merchant-specific attribute of a line item.
type CustomAttribute struct {
	DisplayName string `json:"display_name"`
	Value       string `json:"value"`
}

// MarketplaceSellerDetails names a marketplace's third-party seller.
type MarketplaceSellerDetails struct {
	Name string `json:"name"`
}

// WeightInfo is a product's weight.
type WeightInfo struct {
	Value float64 `json:"value"`
	Unit  string  `json:"unit"`
}

// DimensionsInfo is a product's size.
type DimensionsInfo struct {
	Length float64 `json:"length"`
	Width  float64 `json:"width"`
	Height float64 `json:"height"`
	Unit   string  `json:"unit"`
}

// VariantOption is a selected product variant (size, colour, ...).
type VariantOption struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// DiscountDetail is a discount applied to a line item.
type DiscountDetail struct {
	Code        string `json:"code,omitempty"`
	Type        string `json:"type"`
	Amount      int64  `json:"amount"`
	Description string `json:"description,omitempty"`
	Source      string `json:"source,omitempty"`
}

// LineItem is a priced line of a checkout session.
type LineItem struct {
	ID                       string                    `json:"id"`
	Item                     Item                      `json:"item"`
	Quantity                 int64                     `json:"quantity"`
	Name                     string                    `json:"name,omitempty"`
	Description              string                    `json:"description,omitempty"`
	Images                   []string                  `json:"images,omitempty"`
	UnitAmount               *int64                    `json:"unit_amount,omitempty"`
	Disclosures              []Disclosure              `json:"disclosures,omitempty"`
	CustomAttributes         []CustomAttribute         `json:"custom_attributes,omitempty"`
	MarketplaceSellerDetails *MarketplaceSellerDetails `json:"marketplace_seller_details,omitempty"`
	ProductID                string                    `json:"product_id,omitempty"`
	SKU                      string                    `json:"sku,omitempty"`
	VariantID                string                    `json:"variant_id,omitempty"`
	Category                 string                    `json:"category,omitempty"`
	Tags                     []string                  `json:"tags,omitempty"`
	Weight                   *WeightInfo               `json:"weight,omitempty"`
	Dimensions               *DimensionsInfo           `json:"dimensions,omitempty"`
	AvailabilityStatus       string                    `json:"availability_status,omitempty"`
	AvailableQuantity        *int64                    `json:"available_quantity,omitempty"`
	MaxQuantityPerOrder      int64                     `json:"max_quantity_per_order,omitempty"`
	FulfillableOn            string                    `json:"fulfillable_on,omitempty"`
	VariantOptions           []VariantOption           `json:"variant_options,omitempty"`
	DiscountDetails          []DiscountDetail          `json:"discount_details,omitempty"`
	TaxExempt                bool                      `json:"tax_exempt,omitempty"`
	TaxExemptionReason       string                    `json:"tax_exemption_reason,omitempty"`
	ParentID                 string                    `json:"parent_id,omitempty"`
	Totals                   []Total                   `json:"totals"`
}

// PickupLocation is where a pickup option is collected.
type PickupLocation struct {
	Name         string  `json:"name"`
	Address      Address `json:"address"`
	Phone        string  `json:"phone,omitempty"`
	Instructions string  `json:"instructions,omitempty"`
}

// DeliveryWindow is a local delivery's expected window.
type DeliveryWindow struct {
	Start string `json:"start"`
	End   string `json:"end"`
}

// ServiceArea is a local delivery's area.
type ServiceArea struct {
	RadiusMiles      *float64 `json:"radius_miles,omitempty"`
	CenterPostalCode string   `json:"center_postal_code,omitempty"`
}

// Fulfillment option types (the discriminator of FulfillmentOption).
const (
	FulfillmentShipping      = "shipping"
	FulfillmentDigital       = "digital"
	FulfillmentPickup        = "pickup"
	FulfillmentLocalDelivery = "local_delivery"
)

// FulfillmentOption is one of the schema's FulfillmentOptionShipping,
// FulfillmentOptionDigital, FulfillmentOptionPickup and
// FulfillmentOptionLocalDelivery, told apart by Type; only the members of
// that variant are set.
type FulfillmentOption struct {
	Type        string `json:"type"`
	ID          string `json:"id"`
	Title       string `json:"title"`
	Description string `json:"description,omitempty"`
	// shipping
	Carrier              string `json:"carrier,omitempty"`
	EarliestDeliveryTime string `json:"earliest_delivery_time,omitempty"`
	LatestDeliveryTime   string `json:"latest_delivery_time,omitempty"`
	// pickup
	Location   *PickupLocation `json:"location,omitempty"`
	PickupType string          `json:"pickup_type,omitempty"`
	ReadyBy    string          `json:"ready_by,omitempty"`
	PickupBy   string          `json:"pickup_by,omitempty"`
	// local_delivery
	DeliveryWindow *DeliveryWindow `json:"delivery_window,omitempty"`
	ServiceArea    *ServiceArea    `json:"service_area,omitempty"`

	Totals []Total `json:"totals"`
}

// SelectedFulfillmentOption is the buyer's choice of option for some items.
type SelectedFulfillmentOption struct {
	Type     string   `json:"type"`
	OptionID string   `json:"option_id"`
	ItemIDs  []string `json:"item_ids"`
}

// FulfillmentGroup groups line items by fulfilment method.
type FulfillmentGroup struct {
	ID                 string              `json:"id"`
	ItemIDs            []string            `json:"item_ids"`
	DestinationType    string              `json:"destination_type"`
	FulfillmentDetails *FulfillmentDetails `json:"fulfillment_details,omitempty"`
	LocationID         string              `json:"location_id,omitempty"`
	Instructions       string              `json:"instructions,omitempty"`
}

// Message types (the discriminator of Message).
const (
	MessageTypeInfo    = "info"
	MessageTypeWarning = "warning"
	MessageTypeError   = "error"
)

// Message is one of the schema's MessageInfo, MessageWarning and
// MessageError, told apart by Type (info messages have no Code).
type Message struct {
	Type        string `json:"type"`
	Code        string `json:"code,omitempty"`
	Severity    string `json:"severity,omitempty"`
	Resolution  string `json:"resolution,omitempty"`
	Param       string `json:"param,omitempty"`
	ContentType string `json:"content_type"`
	Content     string `json:"content"`
}

// Link is a policy or support link.
type Link struct {
	Type  string `json:"type"`
	Title string `json:"title,omitempty"`
	URL   string `json:"url"`
}

// AcquirerDetails describe the acquirer of a 3-D Secure authentication.
type AcquirerDetails struct {
	AcquirerBIN        string `json:"acquirer_bin"`
	AcquirerCountry    string `json:"acquirer_country"`
	AcquirerMerchantID string `json:"acquirer_merchant_id"`
	MerchantName       string `json:"merchant_name"`
	RequestorID        string `json:"requestor_id,omitempty"`
}

// FlowPreference is the seller's preferred 3-D Secure flow.
type FlowPreference struct {
	Type         string       `json:"type"`
	Challenge    *FlowSubtype `json:"challenge,omitempty"`
	Frictionless *FlowSubtype `json:"frictionless,omitempty"`
}

// FlowSubtype refines a FlowPreference.
type FlowSubtype struct {
	Type string `json:"type,omitempty"`
}

// AuthenticationMetadata is what the agent needs to run 3-D Secure. The
// schema allows further members; they are not kept.
type AuthenticationMetadata struct {
	AcquirerDetails AcquirerDetails `json:"acquirer_details"`
	DirectoryServer string          `json:"directory_server"`
	FlowPreference  *FlowPreference `json:"flow_preference,omitempty"`
}

// ProtocolVersion is the ACP version a response speaks.
type ProtocolVersion struct {
	Version string `json:"version"`
}

// EstimatedDelivery is a delivery date range.
type EstimatedDelivery struct {
	Earliest string `json:"earliest"`
	Latest   string `json:"latest"`
}

// OrderConfirmation is an order's confirmation details.
type OrderConfirmation struct {
	ConfirmationNumber    string `json:"confirmation_number,omitempty"`
	ConfirmationEmailSent bool   `json:"confirmation_email_sent,omitempty"`
	ReceiptURL            string `json:"receipt_url,omitempty"`
	InvoiceNumber         string `json:"invoice_number,omitempty"`
	OrderNotes            string `json:"order_notes,omitempty"`
}

// SupportInfo is the merchant's support contact.
type SupportInfo struct {
	Email         string `json:"email,omitempty"`
	Phone         string `json:"phone,omitempty"`
	Hours         string `json:"hours,omitempty"`
	HelpCenterURL string `json:"help_center_url,omitempty"`
}

// OrderLineItemQuantity tracks an order line's quantities.
type OrderLineItemQuantity struct {
	Ordered   int64  `json:"ordered"`
	Current   int64  `json:"current"`
	Fulfilled *int64 `json:"fulfilled,omitempty"`
}

// OrderLineItem is what was ordered.
type OrderLineItem struct {
	ID          string                `json:"id"`
	Title       string                `json:"title"`
	ProductID   string                `json:"product_id,omitempty"`
	Description string                `json:"description,omitempty"`
	ImageURL    string                `json:"image_url,omitempty"`
	URL         string                `json:"url,omitempty"`
	Quantity    OrderLineItemQuantity `json:"quantity"`
	UnitPrice   *int64                `json:"unit_price,omitempty"`
	Subtotal    *int64                `json:"subtotal,omitempty"`
	Totals      []Total               `json:"totals,omitempty"`
	Status      string                `json:"status,omitempty"`
}

// LineItemReference is a quantity of a line item.
type LineItemReference struct {
	ID       string `json:"id"`
	Quantity int64  `json:"quantity"`
}

// DigitalDelivery is how digital goods are delivered.
type DigitalDelivery struct {
	AccessURL  string `json:"access_url,omitempty"`
	LicenseKey string `json:"license_key,omitempty"`
	ExpiresAt  string `json:"expires_at,omitempty"`
}

// FulfillmentEvent is a point in a fulfilment's progress.
type FulfillmentEvent struct {
	ID          string `json:"id"`
	Type        string `json:"type"`
	OccurredAt  string `json:"occurred_at"`
	Description string `json:"description,omitempty"`
	Location    string `json:"location,omitempty"`
}

// Fulfillment is how ordered items are delivered.
type Fulfillment struct {
	ID                string              `json:"id"`
	Type              string              `json:"type"`
	Status            string              `json:"status,omitempty"`
	LineItems         []LineItemReference `json:"line_items,omitempty"`
	Carrier           string              `json:"carrier,omitempty"`
	TrackingNumber    string              `json:"tracking_number,omitempty"`
	TrackingURL       string              `json:"tracking_url,omitempty"`
	Destination       *Address            `json:"destination,omitempty"`
	EstimatedDelivery *EstimatedDelivery  `json:"estimated_delivery,omitempty"`
	DigitalDelivery   *DigitalDelivery    `json:"digital_delivery,omitempty"`
	Description       string              `json:"description,omitempty"`
	Events            []FulfillmentEvent  `json:"events,omitempty"`
}

// Adjustment is a post-order change (refund, credit, return, dispute).
type Adjustment struct {
	ID          string              `json:"id"`
	Type        string              `json:"type"`
	OccurredAt  string              `json:"occurred_at"`
	Status      string              `json:"status"`
	LineItems   []LineItemReference `json:"line_items,omitempty"`
	Amount      *int64              `json:"amount,omitempty"`
	Currency    string              `json:"currency,omitempty"`
	Description string              `json:"description,omitempty"`
	Reason      string              `json:"reason,omitempty"`
}

// Order is the order a completed checkout created.
type Order struct {
	Type              string             `json:"type,omitempty"`
	ID                string             `json:"id"`
	CheckoutSessionID string             `json:"checkout_session_id"`
	OrderNumber       string             `json:"order_number,omitempty"`
	ClientReferenceID string             `json:"client_reference_id,omitempty"`
	PermalinkURL      string             `json:"permalink_url"`
	Status            string             `json:"status,omitempty"`
	EstimatedDelivery *EstimatedDelivery `json:"estimated_delivery,omitempty"`
	Confirmation      *OrderConfirmation `json:"confirmation,omitempty"`
	Support           *SupportInfo       `json:"support,omitempty"`
	LineItems         []OrderLineItem    `json:"line_items,omitempty"`
	Fulfillments      []Fulfillment      `json:"fulfillments,omitempty"`
	Adjustments       []Adjustment       `json:"adjustments,omitempty"`
	Totals            []Total            `json:"totals,omitempty"`
}

// Coupon describes a discount's terms.
type Coupon struct {
	ID               string            `json:"id"`
	Name             string            `json:"name"`
	PercentOff       *float64          `json:"percent_off,omitempty"`
	AmountOff        *int64            `json:"amount_off,omitempty"`
	Currency         string            `json:"currency,omitempty"`
	Duration         string            `json:"duration,omitempty"`
	DurationInMonths int64             `json:"duration_in_months,omitempty"`
	MaxRedemptions   int64             `json:"max_redemptions,omitempty"`
	TimesRedeemed    *int64            `json:"times_redeemed,omitempty"`
	Metadata         map[string]string `json:"metadata,omitempty"`
}

// DiscountAllocation is where part of a discount went.
type DiscountAllocation struct {
	Path   string `json:"path"`
	Amount int64  `json:"amount"`
}

// AppliedDiscount is a discount the seller applied.
type AppliedDiscount struct {
	ID          string               `json:"id"`
	Code        string               `json:"code,omitempty"`
	Coupon      Coupon               `json:"coupon"`
	Amount      int64                `json:"amount"`
	Automatic   bool                 `json:"automatic,omitempty"`
	Start       string               `json:"start,omitempty"`
	End         string               `json:"end,omitempty"`
	Method      string               `json:"method,omitempty"`
	Priority    int64                `json:"priority,omitempty"`
	Allocations []DiscountAllocation `json:"allocations,omitempty"`
}

// RejectedDiscount is a code the seller could not apply.
type RejectedDiscount struct {
	Code    string `json:"code"`
	Reason  string `json:"reason"`
	Message string `json:"message,omitempty"`
}

// DiscountsResponse is the discount extension's part of a session.
type DiscountsResponse struct {
	Codes    []string           `json:"codes,omitempty"`
	Applied  []AppliedDiscount  `json:"applied,omitempty"`
	Rejected []RejectedDiscount `json:"rejected,omitempty"`
}

// MarketingConsentOption is a marketing channel the seller asks consent
// for.
type MarketingConsentOption struct {
	Channel          string `json:"channel"`
	DisplayText      string `json:"display_text"`
	PrivacyPolicyURL string `json:"privacy_policy_url"`
	IsSubscribed     bool   `json:"is_subscribed,omitempty"`
}

// Session statuses.
const (
	StatusIncomplete             = "incomplete"
	StatusNotReadyForPayment     = "not_ready_for_payment"
	StatusRequiresEscalation     = "requires_escalation"
	StatusAuthenticationRequired = "authentication_required"
	StatusReadyForPayment        = "ready_for_payment"
	StatusPendingApproval        = "pending_approval"
	StatusCompleteInProgress     = "complete_in_progress"
	StatusCompleted              = "completed"
	StatusCanceled               = "canceled"
	StatusInProgress             = "in_progress"
	StatusExpired                = "expired"
)

// CheckoutSession is the schema's CheckoutSessionBase, the body of every
// session response; Order is set (and required) in a completion's
// response, CheckoutSessionWithOrder.
type CheckoutSession struct {
	ID                         string                      `json:"id"`
	Protocol                   *ProtocolVersion            `json:"protocol,omitempty"`
	Capabilities               Capabilities                `json:"capabilities"`
	Buyer                      *Buyer                      `json:"buyer,omitempty"`
	Status                     string                      `json:"status"`
	Currency                   string                      `json:"currency"`
	PresentmentCurrency        string                      `json:"presentment_currency,omitempty"`
	ExchangeRate               *float64                    `json:"exchange_rate,omitempty"`
	ExchangeRateTimestamp      string                      `json:"exchange_rate_timestamp,omitempty"`
	Locale                     string                      `json:"locale,omitempty"`
	Timezone                   string                      `json:"timezone,omitempty"`
	LineItems                  []LineItem                  `json:"line_items"`
	FulfillmentDetails         *FulfillmentDetails         `json:"fulfillment_details,omitempty"`
	FulfillmentOptions         []FulfillmentOption         `json:"fulfillment_options"`
	SelectedFulfillmentOptions []SelectedFulfillmentOption `json:"selected_fulfillment_options,omitempty"`
	FulfillmentGroups          []FulfillmentGroup          `json:"fulfillment_groups,omitempty"`
	Totals                     []Total                     `json:"totals"`
	Messages                   []Message                   `json:"messages"`
	Links                      []Link                      `json:"links"`
	AuthenticationMetadata     *AuthenticationMetadata     `json:"authentication_metadata,omitempty"`
	CreatedAt                  string                      `json:"created_at,omitempty"`
	UpdatedAt                  string                      `json:"updated_at,omitempty"`
	ExpiresAt                  string                      `json:"expires_at,omitempty"`
	ContinueURL                string                      `json:"continue_url,omitempty"`
	Metadata                   json.RawMessage             `json:"metadata,omitempty"`
	QuoteID                    string                      `json:"quote_id,omitempty"`
	QuoteExpiresAt             string                      `json:"quote_expires_at,omitempty"`
	Discounts                  *DiscountsResponse          `json:"discounts,omitempty"`
	MarketingConsentOptions    []MarketingConsentOption    `json:"marketing_consent_options,omitempty"`
	Order                      *Order                      `json:"order,omitempty"`
}

// Error is the checkout API's error body (4xx and 5xx answers); the
// delegate payment API uses the same shape with closed type and code
// enums.
type Error struct {
	Type              string   `json:"type"`
	Code              string   `json:"code"`
	Message           string   `json:"message"`
	Param             string   `json:"param,omitempty"`
	SupportedVersions []string `json:"supported_versions,omitempty"`
}

// Error types.
const (
	ErrorInvalidRequest     = "invalid_request"
	ErrorProcessingError    = "processing_error"
	ErrorServiceUnavailable = "service_unavailable"
	ErrorRateLimitExceeded  = "rate_limit_exceeded" // delegate payment only
)

// Requests.

// AffiliateAttributionSource is where an attribution came from.
type AffiliateAttributionSource struct {
	Type string `json:"type"`
	URL  string `json:"url,omitempty"`
}

// AffiliateAttribution credits a publisher (write-only). Token or
// PublisherID is required.
type AffiliateAttribution struct {
	Provider    string                      `json:"provider"`
	Token       string                      `json:"token,omitempty"`
	PublisherID string                      `json:"publisher_id,omitempty"`
	CampaignID  string                      `json:"campaign_id,omitempty"`
	CreativeID  string                      `json:"creative_id,omitempty"`
	SubID       string                      `json:"sub_id,omitempty"`
	Source      *AffiliateAttributionSource `json:"source,omitempty"`
	IssuedAt    string                      `json:"issued_at,omitempty"`
	ExpiresAt   string                      `json:"expires_at,omitempty"`
	Metadata    map[string]any              `json:"metadata,omitempty"`
	Touchpoint  string                      `json:"touchpoint,omitempty"`
}

// DiscountsRequest submits discount codes.
type DiscountsRequest struct {
	Codes []string `json:"codes"`
}

// CheckoutSessionCreateRequest is the body of POST /checkout_sessions.
type CheckoutSessionCreateRequest struct {
	Buyer                *Buyer                `json:"buyer,omitempty"`
	LineItems            []Item                `json:"line_items"`
	Currency             string                `json:"currency"`
	FulfillmentDetails   *FulfillmentDetails   `json:"fulfillment_details,omitempty"`
	Capabilities         Capabilities          `json:"capabilities"`
	FulfillmentGroups    []FulfillmentGroup    `json:"fulfillment_groups,omitempty"`
	AffiliateAttribution *AffiliateAttribution `json:"affiliate_attribution,omitempty"`
	Coupons              []string              `json:"coupons,omitempty"`
	Discounts            *DiscountsRequest     `json:"discounts,omitempty"`
	Locale               string                `json:"locale,omitempty"`
	Timezone             string                `json:"timezone,omitempty"`
	QuoteID              string                `json:"quote_id,omitempty"`
	Metadata             map[string]any        `json:"metadata,omitempty"`
	OrderNotes           string                `json:"order_notes,omitempty"`
}

// CheckoutSessionUpdateRequest is the body of POST /checkout_sessions/{id}.
type CheckoutSessionUpdateRequest struct {
	Buyer                      *Buyer                      `json:"buyer,omitempty"`
	LineItems                  []Item                      `json:"line_items,omitempty"`
	FulfillmentDetails         *FulfillmentDetails         `json:"fulfillment_details,omitempty"`
	FulfillmentGroups          []FulfillmentGroup          `json:"fulfillment_groups,omitempty"`
	SelectedFulfillmentOptions []SelectedFulfillmentOption `json:"selected_fulfillment_options,omitempty"`
	Coupons                    []string                    `json:"coupons,omitempty"`
	Discounts                  *DiscountsRequest           `json:"discounts,omitempty"`
	OrderNotes                 string                      `json:"order_notes,omitempty"`
}

// Credential is a payment instrument's credential (a delegated token).
type Credential struct {
	Type  string `json:"type"`
	Token string `json:"token"`
}

// Instrument is a payment instrument.
type Instrument struct {
	Type       string     `json:"type"`
	Credential Credential `json:"credential"`
}

// PaymentData pays a completion: a handler and an instrument, or a
// purchase order number.
type PaymentData struct {
	HandlerID           string      `json:"handler_id,omitempty"`
	Instrument          *Instrument `json:"instrument,omitempty"`
	BillingAddress      *Address    `json:"billing_address,omitempty"`
	PurchaseOrderNumber string      `json:"purchase_order_number,omitempty"`
	PaymentTerms        string      `json:"payment_terms,omitempty"`
	DueDate             string      `json:"due_date,omitempty"`
	ApprovalRequired    bool        `json:"approval_required,omitempty"`
}

// OutcomeDetails are a 3-D Secure authentication's results.
type OutcomeDetails struct {
	ThreeDSCryptogram           string `json:"three_ds_cryptogram"`
	ElectronicCommerceIndicator string `json:"electronic_commerce_indicator"`
	TransactionID               string `json:"transaction_id"`
	Version                     string `json:"version"`
}

// AuthenticationResult is the agent's 3-D Secure outcome.
type AuthenticationResult struct {
	Outcome        string          `json:"outcome"`
	OutcomeDetails *OutcomeDetails `json:"outcome_details,omitempty"`
}

// RiskSignals are the checkout's fraud signals.
type RiskSignals struct {
	IPAddress         string `json:"ip_address,omitempty"`
	UserAgent         string `json:"user_agent,omitempty"`
	AcceptLanguage    string `json:"accept_language,omitempty"`
	SessionID         string `json:"session_id,omitempty"`
	DeviceFingerprint string `json:"device_fingerprint,omitempty"`
}

// MarketingConsent is the buyer's decision for one channel.
type MarketingConsent struct {
	Channel string `json:"channel"`
	OptedIn bool   `json:"opted_in"`
}

// CheckoutSessionCompleteRequest is the body of
// POST /checkout_sessions/{id}/complete.
type CheckoutSessionCompleteRequest struct {
	Buyer                *Buyer                `json:"buyer,omitempty"`
	PaymentData          PaymentData           `json:"payment_data"`
	AuthenticationResult *AuthenticationResult `json:"authentication_result,omitempty"`
	AffiliateAttribution *AffiliateAttribution `json:"affiliate_attribution,omitempty"`
	RiskSignals          *RiskSignals          `json:"risk_signals,omitempty"`
	MarketingConsents    []MarketingConsent    `json:"marketing_consents,omitempty"`
	OrderNotes           string                `json:"order_notes,omitempty"`
}

// IntentTrace says why a session is abandoned.
type IntentTrace struct {
	ReasonCode   string         `json:"reason_code"`
	TraceSummary string         `json:"trace_summary,omitempty"`
	Metadata     map[string]any `json:"metadata,omitempty"`
}

// CancelSessionRequest is the optional body of
// POST /checkout_sessions/{id}/cancel.
type CancelSessionRequest struct {
	IntentTrace *IntentTrace `json:"intent_trace,omitempty"`
}
