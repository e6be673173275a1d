package contract

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
)

// AsyncAPI returns the event surface as an AsyncAPI 3.0 document, generated
// from the same model (event kinds and payload types) as the OpenAPI
// document, so a consumer generated from it matches what is sent.
//
// Each event kind is a channel whose address is null: the address is the
// URL of each registered endpoint, chosen by the operator. The operation on
// a channel is "send": the server sends, receivers receive. Every message
// carries the delivery headers (Svc-Signature and the event's id and type).
func (m *Model) AsyncAPI(baseURL string) ([]byte, error) {
	base, err := cleanBaseURL(baseURL)
	if err != nil {
		return nil, err
	}
	channels := map[string]any{}
	operations := map[string]any{}
	messages := map[string]any{}
	for _, ev := range m.events {
		payload := maps.Clone(m.eventDocs[ev.Name])
		if _, isRef := payload["$ref"]; isRef {
			// The kind fixes the type member; the rest of the shape is shared.
			payload = map[string]any{"allOf": []any{payload, map[string]any{
				"type": "object", "properties": map[string]any{"type": map[string]any{"const": ev.Name}}}}}
		}
		messages[ev.Name] = map[string]any{
			"name":        ev.Name,
			"title":       ev.Name,
			"summary":     ev.Description,
			"contentType": MediaJSON,
			"headers":     map[string]any{"$ref": "#/components/schemas/DeliveryHeaders"},
			"payload":     payload,
		}
		channels[ev.Name] = map[string]any{
			"address":     nil,
			"title":       ev.Name,
			"description": "POST to every active endpoint subscribed to " + ev.Name + " (or to \"*\").",
			"messages":    map[string]any{ev.Name: map[string]any{"$ref": "#/components/messages/" + ev.Name}},
		}
		operations["send."+ev.Name] = map[string]any{
			"action":   "send",
			"channel":  map[string]any{"$ref": "#/channels/" + ev.Name},
			"messages": []any{map[string]any{"$ref": "#/channels/" + ev.Name + "/messages/" + ev.Name}},
			"bindings": map[string]any{"http": map[string]any{"method": "POST", "bindingVersion": "0.3.0"}},
		}
	}
	schemas := make(map[string]any, len(m.gen.components)+1)
	for name, s := range m.gen.components {
		schemas[name] = s
	}
	schemas["DeliveryHeaders"] = map[string]any{
		"type":     "object",
		"required": []any{HeaderSignature, "Svc-Event-Id", "Svc-Event-Type"},
		"properties": map[string]any{
			HeaderSignature: map[string]any{"type": "string", "pattern": `^t=[0-9]+(,v1=[0-9a-f]{64})+$`,
				"description": "t=<unix seconds>,v1=<hex HMAC-SHA256 of \"{t}.{raw body}\" keyed by the endpoint's secret>; " +
					"two v1 values for 24 hours after a secret rotation. Verify it over the raw body before parsing."},
			"Svc-Event-Id":   map[string]any{"type": "string", "description": "The event id (evt_<sequence>_<kind>); deliveries are at least once, deduplicate on it."},
			"Svc-Event-Type": map[string]any{"type": "string", "description": "The event kind."},
		},
	}
	doc := map[string]any{
		"asyncapi": "3.0.0",
		"id":       "urn:countersign:events",
		"info": map[string]any{
			"title":   m.title + " events",
			"version": m.version,
			"description": "Signed events derived from the record served at " + base + "/audit: every entry yields " +
				"audit.appended, and gate decisions, settlements and memory changes yield their own kinds. Delivery is " +
				"at least once with retries (exponential backoff with jitter, for up to 3 days); arrival order is not the " +
				"sequence — the sequence member is. 2xx ends a delivery, 410 Gone deactivates the endpoint. Each event " +
				"carries the whole signed record entry, verifiable with the deployment's record key.",
		},
		"defaultContentType": MediaJSON,
		"channels":           channels,
		"operations":         operations,
		"components":         map[string]any{"messages": messages, "schemas": schemas},
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("contract: encode AsyncAPI document: %w", err)
	}
	return buf.Bytes(), nil
}
