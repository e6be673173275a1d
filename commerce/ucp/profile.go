package ucp

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"

	"github.com/countersign/countersign/commerce/cart"
)

// The protocol versions this package speaks, oldest first.
const (
	V20260111 = "2026-01-11"
	V20260408 = "2026-04-08"
)

// Versions lists the versions this package speaks, oldest first.
func Versions() []string { return []string{V20260111, V20260408} }

// Names the protocol defines that the client relies on.
const (
	// ShoppingService is the service whose REST binding the client uses.
	ShoppingService = "dev.ucp.shopping"
	// CheckoutCapability must be offered by the merchant.
	CheckoutCapability = "dev.ucp.shopping.checkout"
)

// ErrNoCommonVersion: the merchant offers no protocol version we are
// allowed to speak. Check with errors.Is.
var ErrNoCommonVersion = errors.New("ucp: no protocol version in common with the merchant")

// defaultMaxBody caps every body read from a merchant.
const defaultMaxBody = 1 << 20

// Profile is a merchant's discovery profile (/.well-known/ucp) for one
// protocol version, validated against that version's profile schema.
type Profile struct {
	// URL is where the profile was fetched.
	URL string
	// Version is the protocol version the profile describes.
	Version string
	// SupportedVersions maps each protocol version the merchant offers to
	// the profile describing it, Version → URL included. Profiles of
	// 2026-04-08 and later list older versions in ucp.supported_versions;
	// a 2026-01-11 profile offers only its own version.
	SupportedVersions map[string]string
	// Endpoint is the REST endpoint of the shopping service ("" when the
	// merchant offers no REST binding, or the version is unknown to us).
	Endpoint string
	// Capabilities are the capabilities the merchant declares.
	Capabilities []Capability
	// PaymentHandlers are the payment handlers the profile declares.
	PaymentHandlers []PaymentHandler
	// SigningKeys are the public keys of signing_keys, as published (the
	// client uses the usable ones, see the package doc).
	SigningKeys []SigningKey
	// Ignored lists the parts of the profile that do not satisfy the
	// schema but that the client never uses (a payment handler's version,
	// spec or schema URIs), each as "path: violation", sorted. They are
	// reported, not refused.
	Ignored []string
}

// Capability is one declared capability.
type Capability struct {
	Name    string
	Version string
}

// PaymentHandler is one payment handler a merchant declares.
type PaymentHandler struct {
	// ID is the handler instance id instruments refer to.
	ID string
	// Name is the handler's reverse-domain name.
	Name    string
	Version string
	// TokenizeURL is config.endpoint: the handler's tokenization endpoint
	// (the UCP tokenization API, POST /tokenize) when the handler follows
	// the tokenization pattern; "" otherwise.
	TokenizeURL string
	// Identity is config.identity.access_token, injected into the token
	// binding when present.
	Identity string
}

// Offers reports the versions the profile offers, newest first.
func (p Profile) Offers() []string {
	vs := make([]string, 0, len(p.SupportedVersions))
	for v := range p.SupportedVersions {
		vs = append(vs, v)
	}
	sort.Sort(sort.Reverse(sort.StringSlice(vs)))
	return vs
}

// HasCapability reports whether the profile declares capability name.
func (p Profile) HasCapability(name string) bool {
	return slices.ContainsFunc(p.Capabilities, func(c Capability) bool { return c.Name == name })
}

// Negotiate picks the newest version both the merchant offers and we
// allow (versions are dates, so the newest sorts last). It fails with
// ErrNoCommonVersion when there is none.
func Negotiate(offered, allowed []string) (string, error) {
	best := ""
	for _, v := range offered {
		if slices.Contains(allowed, v) && slices.Contains(Versions(), v) && v > best {
			best = v
		}
	}
	if best == "" {
		return "", fmt.Errorf("%w: merchant offers %q, we allow %q", ErrNoCommonVersion, offered, allowed)
	}
	return best, nil
}

// Discover fetches the profile at profileURL with client and validates it
// against the profile schema of the version it declares. A profile of a
// version newer than any we know is checked only for ucp.version and
// ucp.supported_versions (all we may use of it: it points at the profiles
// of older versions); one older than any we know is refused.
//
// Errors match cart.ErrUnavailable (the profile could not be fetched) or
// cart.ErrInvalidResponse (it does not satisfy the schema).
func Discover(ctx context.Context, client *http.Client, profileURL string) (Profile, error) {
	p, err := discover(ctx, client, profileURL, defaultMaxBody, nil)
	if err != nil {
		return Profile{}, fmt.Errorf("ucp: discover: %w", err)
	}
	return p, nil
}

func discover(ctx context.Context, client *http.Client, profileURL string, maxBody int64, headers func(http.Header)) (Profile, error) {
	if client == nil {
		return Profile{}, errors.New("no HTTP client")
	}
	if !isAbsURI(profileURL) {
		return Profile{}, fmt.Errorf("%w: profile URL %q is not absolute", cart.ErrUnavailable, profileURL)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, profileURL, nil)
	if err != nil {
		return Profile{}, fmt.Errorf("%w: %v", cart.ErrUnavailable, err)
	}
	req.Header.Set("Accept", "application/json")
	if headers != nil {
		headers(req.Header)
	}
	resp, err := client.Do(req)
	if err != nil {
		return Profile{}, fmt.Errorf("%w: %w", cart.ErrUnavailable, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return Profile{}, fmt.Errorf("%w: profile answered HTTP %d", cart.ErrUnavailable, resp.StatusCode)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxBody+1))
	if err != nil {
		return Profile{}, fmt.Errorf("%w: %w", cart.ErrUnavailable, err)
	}
	if int64(len(raw)) > maxBody {
		return Profile{}, fmt.Errorf("%w: profile larger than %d bytes", cart.ErrInvalidResponse, maxBody)
	}
	p, err := decodeProfile(raw)
	if err != nil {
		return Profile{}, err
	}
	p.URL = profileURL
	p.SupportedVersions[p.Version] = profileURL
	return p, nil
}

// decodeProfile validates raw as a discovery profile and extracts what we
// use. Errors match cart.ErrInvalidResponse.
func decodeProfile(raw []byte) (Profile, error) {
	doc, err := parseJSON(raw)
	if err != nil {
		return Profile{}, fmt.Errorf("%w: profile: %v", cart.ErrInvalidResponse, err)
	}
	c := &checker{}
	root := c.object("$", doc)
	u, _ := c.optObject("$", root, "ucp", true)
	version, _ := c.pattern("$.ucp", u, "version", true, versionRE)
	if !c.ok() {
		return Profile{}, fmt.Errorf("%w: profile: %v", cart.ErrInvalidResponse, c.err)
	}
	var p Profile
	switch {
	case version == V20260111:
		p = checkProfile0111(c, root)
	case version == V20260408:
		p = checkProfile0408(c, root)
	case version > V20260408:
		// A newer protocol: all we may use is the map to older profiles.
		p = Profile{Version: version, SupportedVersions: checkSupportedVersions(c, "$.ucp", u)}
	default:
		return Profile{}, fmt.Errorf("%w: profile declares protocol version %s, older than any we speak", ErrNoCommonVersion, version)
	}
	if !c.ok() {
		return Profile{}, fmt.Errorf("%w: profile (version %s): %v", cart.ErrInvalidResponse, version, c.err)
	}
	p.Version = version
	p.Ignored = slices.Clone(c.ignored)
	slices.Sort(p.Ignored)
	if p.SupportedVersions == nil {
		p.SupportedVersions = map[string]string{}
	}
	return p, nil
}

func checkSupportedVersions(c *checker, path string, u map[string]any) map[string]string {
	out := map[string]string{}
	sv, ok := c.optObject(path, u, "supported_versions", false)
	if !ok {
		return out
	}
	for k, v := range sv {
		if !versionRE.MatchString(k) {
			c.failf(path+".supported_versions", "key %q is not a version", k)
			continue
		}
		s, isStr := v.(string)
		if !isStr || !isAbsURI(s) {
			c.failf(path+".supported_versions."+k, "must be an absolute URI")
			continue
		}
		out[k] = s
	}
	return out
}

// checkSigningKeys checks signing_keys (the same in both versions) and
// returns them.
func checkSigningKeys(c *checker, root map[string]any) []SigningKey {
	keys, _ := c.array("$", root, "signing_keys", false)
	out := make([]SigningKey, 0, len(keys))
	for i, k := range keys {
		p := idx("$.signing_keys", i)
		m := c.object(p, k)
		var sk SigningKey
		sk.Kid, _ = c.str(p, m, "kid", true)
		sk.Kty, _ = c.str(p, m, "kty", true)
		sk.Crv, _ = c.str(p, m, "crv", false)
		sk.X, _ = c.str(p, m, "x", false)
		sk.Y, _ = c.str(p, m, "y", false)
		for _, f := range []string{"n", "e"} {
			c.str(p, m, f, false)
		}
		sk.Alg, _ = c.str(p, m, "alg", false)
		sk.Use, _ = c.enum(p, m, "use", false, "sig", "enc")
		out = append(out, sk)
	}
	return out
}

// handlerConfig extracts the tokenization pattern's config.
func handlerConfig(m map[string]any) (endpoint, identity string) {
	cfg, _ := m["config"].(map[string]any)
	if e, ok := cfg["endpoint"].(string); ok && isHTTPURL(e) {
		endpoint = e
	}
	if id, ok := cfg["identity"].(map[string]any); ok {
		identity, _ = id["access_token"].(string)
	}
	return endpoint, identity
}

// ---- 2026-01-11 ----

func checkProfile0111(c *checker, root map[string]any) Profile {
	var p Profile
	u, _ := c.optObject("$", root, "ucp", true)
	c.pattern("$.ucp", u, "version", true, versionRE)
	services, _ := c.optObject("$.ucp", u, "services", true)
	for name, sv := range services {
		sp := "$.ucp.services." + name
		s := c.object(sp, sv)
		c.pattern(sp, s, "version", true, versionRE)
		c.uri(sp, s, "spec", true)
		for _, t := range []string{"rest", "mcp"} {
			if b, ok := c.optObject(sp, s, t, false); ok {
				c.uri(sp+"."+t, b, "schema", true)
				e, _ := c.uri(sp+"."+t, b, "endpoint", true)
				if t == "rest" && name == ShoppingService {
					p.Endpoint = e
				}
			}
		}
		if b, ok := c.optObject(sp, s, "a2a", false); ok {
			c.uri(sp+".a2a", b, "endpoint", true)
		}
		if b, ok := c.optObject(sp, s, "embedded", false); ok {
			c.uri(sp+".embedded", b, "schema", true)
		}
	}
	caps, _ := c.array("$.ucp", u, "capabilities", true)
	for i, cv := range caps {
		p.Capabilities = append(p.Capabilities, checkCapability0111(c, idx("$.ucp.capabilities", i), cv, true))
	}
	if pay, ok := c.optObject("$", root, "payment", false); ok {
		hs, _ := c.array("$.payment", pay, "handlers", false)
		for i, h := range hs {
			p.PaymentHandlers = append(p.PaymentHandlers, checkHandler0111(c, idx("$.payment.handlers", i), h))
		}
	}
	p.SigningKeys = checkSigningKeys(c, root)
	p.SupportedVersions = map[string]string{}
	return p
}

func checkCapability0111(c *checker, path string, v any, discovery bool) Capability {
	m := c.object(path, v)
	name, _ := c.pattern(path, m, "name", true, reverseDomainRE)
	ver, _ := c.pattern(path, m, "version", true, versionRE)
	c.uri(path, m, "spec", discovery)
	c.uri(path, m, "schema", discovery)
	c.pattern(path, m, "extends", false, reverseDomainRE)
	c.optObject(path, m, "config", false)
	return Capability{Name: name, Version: ver}
}

func checkHandler0111(c *checker, path string, v any) PaymentHandler {
	m := c.object(path, v)
	// Used: id (instruments name it), name (credentials may name it) and
	// config (the tokenization endpoint). Never used: version, spec and
	// the schema URIs.
	id, _ := c.str(path, m, "id", true)
	name, _ := c.str(path, m, "name", true)
	var ver string
	c.soft(func(sc *checker) { ver, _ = sc.pattern(path, m, "version", true, versionRE) })
	c.soft(func(sc *checker) { sc.uri(path, m, "spec", true) })
	c.soft(func(sc *checker) { sc.uri(path, m, "config_schema", true) })
	c.soft(func(sc *checker) {
		schemas, _ := sc.array(path, m, "instrument_schemas", true)
		for i, s := range schemas {
			if str, ok := s.(string); !ok || !isAbsURI(str) {
				sc.failf(idx(path+".instrument_schemas", i), "must be an absolute URI")
			}
		}
	})
	c.optObject(path, m, "config", true)
	e, ident := handlerConfig(m)
	return PaymentHandler{ID: id, Name: name, Version: ver, TokenizeURL: e, Identity: ident}
}

// ---- 2026-04-08 ----

// checkProfile0408 checks a business profile (the schema's anyOf accepts
// a platform profile too; a merchant's /.well-known/ucp is a business
// profile, so we require that branch, which is stricter).
func checkProfile0408(c *checker, root map[string]any) Profile {
	var p Profile
	u, _ := c.optObject("$", root, "ucp", true)
	svc := checkUCPBase0408(c, "$.ucp", u, true, true)
	p.Endpoint = svc.endpoint
	p.Capabilities = svc.caps
	p.PaymentHandlers = svc.handlers
	p.SupportedVersions = checkSupportedVersions(c, "$.ucp", u)
	p.SigningKeys = checkSigningKeys(c, root)
	return p
}

type ucpMeta struct {
	status   string
	endpoint string
	caps     []Capability
	handlers []PaymentHandler
}

// checkUCPBase0408 checks ucp.json#/$defs/base, with services and
// payment_handlers required for a business profile (business=true also
// applies the business service rules) and payment_handlers required for a
// checkout response (requireHandlers).
func checkUCPBase0408(c *checker, path string, u map[string]any, business, requireHandlers bool) ucpMeta {
	var out ucpMeta
	c.pattern(path, u, "version", true, versionRE)
	out.status, _ = c.enum(path, u, "status", false, "success", "error")
	registry := func(key string, required bool, item func(p, name string, m map[string]any)) {
		// A payment handler's version, spec and schema are never used.
		soft := key == "payment_handlers"
		reg, _ := c.optObject(path, u, key, required)
		for name, v := range reg {
			rp := path + "." + key + "." + name
			if !reverseDomainRE.MatchString(name) {
				c.failf(path+"."+key, "key %q is not a reverse-domain name", name)
			}
			arr, ok := v.([]any)
			if !ok {
				c.failf(rp, "must be an array")
				continue
			}
			for i, e := range arr {
				ip := idx(rp, i)
				m := c.object(ip, e)
				checkEntity0408(c, ip, m, soft)
				item(ip, name, m)
			}
		}
	}
	registry("services", business, func(p, name string, m map[string]any) {
		t, _ := c.enum(p, m, "transport", true, "rest", "mcp", "a2a", "embedded")
		e, _ := c.uri(p, m, "endpoint", business && t != "embedded")
		if t == "embedded" {
			if cfg, ok := c.optObject(p, m, "config", false); ok {
				for _, k := range []string{"delegate", "color_scheme"} {
					arr, _ := c.array(p+".config", cfg, k, false)
					for i, s := range arr {
						str, isStr := s.(string)
						if !isStr || (k == "color_scheme" && str != "light" && str != "dark") {
							c.failf(idx(p+".config."+k, i), "invalid value")
						}
					}
				}
			}
		}
		if t == "rest" && name == ShoppingService && out.endpoint == "" {
			out.endpoint = e
		}
	})
	registry("capabilities", false, func(p, name string, m map[string]any) {
		if v, ok := m["extends"]; ok {
			switch x := v.(type) {
			case string:
				if !reverseDomainRE.MatchString(x) {
					c.failf(p+".extends", "must be a reverse-domain name")
				}
			case []any:
				if len(x) == 0 {
					c.failf(p+".extends", "must not be empty")
				}
				for _, s := range x {
					if str, ok := s.(string); !ok || !reverseDomainRE.MatchString(str) {
						c.failf(p+".extends", "must hold reverse-domain names")
					}
				}
			default:
				c.failf(p+".extends", "must be a string or an array")
			}
		}
		ver, _ := m["version"].(string)
		out.caps = append(out.caps, Capability{Name: name, Version: ver})
	})
	registry("payment_handlers", business || requireHandlers, func(p, name string, m map[string]any) {
		id, _ := c.str(p, m, "id", true)
		if arr, ok := c.array(p, m, "available_instruments", false); ok {
			if len(arr) == 0 {
				c.failf(p+".available_instruments", "must not be empty")
			}
			for i, a := range arr {
				ap := idx(p+".available_instruments", i)
				am := c.object(ap, a)
				c.str(ap, am, "type", true)
				if cons, ok := c.optObject(ap, am, "constraints", false); ok && len(cons) == 0 {
					c.failf(ap+".constraints", "must have at least one property")
				}
			}
		}
		ver, _ := m["version"].(string)
		e, ident := handlerConfig(m)
		out.handlers = append(out.handlers, PaymentHandler{ID: id, Name: name, Version: ver, TokenizeURL: e, Identity: ident})
	})
	return out
}

// checkEntity0408 checks ucp.json#/$defs/entity; with soft, the parts
// the client never uses (version, spec, schema) only into c.ignored.
func checkEntity0408(c *checker, path string, m map[string]any, soft bool) {
	for _, f := range []func(*checker){
		func(sc *checker) { sc.pattern(path, m, "version", true, versionRE) },
		func(sc *checker) { sc.uri(path, m, "spec", false) },
		func(sc *checker) { sc.uri(path, m, "schema", false) },
	} {
		if soft {
			c.soft(f)
		} else {
			f(c)
		}
	}
	c.str(path, m, "id", false)
	c.optObject(path, m, "config", false)
}
