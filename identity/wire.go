package identity

// Request and parameter types of the identity operations. Their validate
// tags are checked by the HTTP edge before a handler runs and projected
// into /openapi.json.

// MediaJWS is the media type of a JWS in its JSON serialization (RFC 7515
// §9.2.2): the v2 flattened envelope of a disclosure is served with it.
const MediaJWS = "application/jose+json"

// DiscloseParams choose the envelope of a served disclosure.
type DiscloseParams struct {
	Envelope string `query:"envelope" validate:"omitempty,oneof=v1 jws" doc:"v1 (the object envelope, the default) or jws (the v2 flattened JWS). Without it, Accept: application/jose+json selects jws."`
}

// ResolveRequest is the body of POST /resolve.
type ResolveRequest struct {
	Ref    string `json:"ref" validate:"required,max=512" doc:"What to resolve: a did:key, a 64-hex ADP agent id, a CAIP-10 account id (namespace:reference:address), or the id of a registered counterparty or merchant."`
	Verify bool   `json:"verify,omitempty" doc:"For a registered counterparty: fetch its disclosure from its registered base URL, verify it with the live handshake, and record the decision (which becomes trust). Never fetches a URL the caller supplies."`
}

// ChallengeRequest is the body of POST /identity/challenges.
type ChallengeRequest struct {
	VerifierID string `json:"verifierId,omitempty" validate:"omitempty,max=256" doc:"Binds the proof to this exchange (the RFC 9421 tag)."`
}

// CounterpartyRequest is the body of POST /identity/counterparties.
type CounterpartyRequest struct {
	ID           string   `json:"id" validate:"required,max=64" doc:"Registry id: lowercase letters, digits, '.', '_' and '-'."`
	Name         string   `json:"name,omitempty" validate:"omitempty,max=200" doc:"A name for people."`
	Kind         string   `json:"kind,omitempty" validate:"omitempty,oneof=agent merchant service" doc:"agent (default), merchant or service."`
	BaseURL      string   `json:"baseUrl" validate:"required,max=2000" doc:"Its base URL (https; http only in sandbox): its disclosure is fetched from <baseUrl>/.well-known/agent-disclosure."`
	AgentID      string   `json:"agentId" validate:"required,max=128" doc:"The ADP agent id it must disclose as: 64 hex or did:key."`
	Rails        []string `json:"rails,omitempty" validate:"max=32,dive,max=64" doc:"Rails it can be paid on."`
	Capabilities []string `json:"capabilities,omitempty" validate:"max=32,dive,max=64" doc:"Capabilities it offers."`
	Rationale    string   `json:"rationale" validate:"required,max=2000" doc:"Why, in at least 10 characters; written into the record."`
}

// Registration returns the registration the request asks for.
func (r CounterpartyRequest) Registration() Registration {
	return Registration{ID: r.ID, Name: r.Name, Kind: r.Kind, BaseURL: r.BaseURL, AgentID: r.AgentID,
		Rails: r.Rails, Capabilities: r.Capabilities}
}

// RevokeBody is the body of POST /identity/revocations.
type RevokeBody struct {
	RevokeRequest
	Rationale string `json:"rationale" validate:"required,max=2000" doc:"Why, in at least 10 characters; written into the record."`
}

// RotateRequest is the body of POST /identity/rotate.
type RotateRequest struct {
	Rationale string `json:"rationale" validate:"required,max=2000" doc:"Why, in at least 10 characters; written into the record."`
}

// CounterpartyListParams page through registrations.
type CounterpartyListParams struct {
	Cursor string `query:"cursor" validate:"omitempty,max=256" doc:"Opaque cursor: the nextCursor of the previous page."`
	Limit  int    `query:"limit" default:"20" validate:"min=1,max=100" doc:"Items per page, 1 to 100."`
}
