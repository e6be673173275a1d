package pay

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/countersign/countersign/gate"
	"github.com/google/go-cmp/cmp"
)

// validBody is the DESIGN §4 example with real-looking values.
func validBody(agent string) string {
	return `{"idempotencyKey":"7f3c6a2e","payee":"acct:seller.example",` +
		`"amount":{"minor":1250,"currency":"USD"},"purpose":"invoice 1182",` +
		`"terms":{"rail":"sandbox-card","reversibility":"reversible","finality":"instant",` +
		`"credential":"api-key","capitalSource":"payer","presence":"delegated"},` +
		`"envelope":{"agent":"` + agent + `","mandate":"aGVhZA.cGF5bG9hZA.c2ln","signature":"aGVhZA..c2ln"}}`
}

var testAgent = strings.Repeat("ab", 32)

func TestDecodeInstructionValid(t *testing.T) {
	in, err := DecodeInstruction([]byte(" \n" + validBody(testAgent) + "\r\n\t "))
	if err != nil {
		t.Fatal(err)
	}
	want := &Instruction{
		IdempotencyKey: "7f3c6a2e",
		Payee:          "acct:seller.example",
		Amount:         Amount{Minor: 1250, Currency: "USD"},
		Purpose:        "invoice 1182",
		Terms: Terms{Rail: "sandbox-card", Reversibility: gate.Reversible, Finality: gate.FinalityInstant,
			Credential: gate.CredentialAPIKey, CapitalSource: gate.CapitalPayer, Presence: gate.PresenceDelegated},
		Envelope: Envelope{Agent: testAgent, Mandate: "aGVhZA.cGF5bG9hZA.c2ln", Signature: "aGVhZA..c2ln"},
	}
	if diff := cmp.Diff(want, in); diff != "" {
		t.Errorf("decoded (-want +got):\n%s", diff)
	}
	// Member order does not matter, escapes are JSON's.
	reordered := `{"envelope":{"signature":"aGVhZA..c2ln","mandate":"aGVhZA.cGF5bG9hZA.c2ln","agent":"` + testAgent + `"},` +
		`"terms":{"presence":"delegated","capitalSource":"payer","credential":"api-key","finality":"instant","reversibility":"reversible","rail":"sandbox-card"},` +
		`"purpose":"invoice \u0031182","amount":{"currency":"USD","minor":1250},"payee":"acct:seller.example","idempotencyKey":"7f3c6a2e"}`
	in2, err := DecodeInstruction([]byte(reordered))
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, in2); diff != "" {
		t.Errorf("reordered (-want +got):\n%s", diff)
	}
}

// replace returns the valid body with one substring replaced, failing if
// the substring is missing so a table entry cannot silently test nothing.
func replace(t *testing.T, old, new string) string {
	t.Helper()
	b := validBody(testAgent)
	if !strings.Contains(b, old) {
		t.Fatalf("%q not in the valid body", old)
	}
	return strings.Replace(b, old, new, 1)
}

func TestDecodeInstructionMalformed(t *testing.T) {
	type fr struct{ field, rule string }
	tests := []struct {
		name string
		body string
		want []fr
	}{
		// The body as a whole.
		{"empty", ``, []fr{{"", "syntax"}}},
		{"spaces", `   `, []fr{{"", "syntax"}}},
		{"null", `null`, []fr{{"", "type"}}},
		{"array", `[]`, []fr{{"", "type"}}},
		{"string", `"x"`, []fr{{"", "type"}}},
		{"number", `12`, []fr{{"", "type"}}},
		{"invalid UTF-8", replace(t, "invoice", "inv\xffoice"), []fr{{"", "utf8"}}},
		{"truncated", validBody(testAgent)[:40], []fr{{"", "syntax"}}},
		{"two objects", validBody(testAgent) + "{}", []fr{{"", "syntax"}}},
		{"trailing garbage", validBody(testAgent) + " x", []fr{{"", "syntax"}}},
		{"trailing comma", replace(t, `"delegated"}`, `"delegated",}`), []fr{{"", "syntax"}}},
		{"BOM", "\ufeff" + validBody(testAgent), []fr{{"", "syntax"}}},
		{"single quotes", `{'payee':1}`, []fr{{"", "syntax"}}},

		// Members.
		{"unknown member", replace(t, `{"idempotencyKey"`, `{"extra":1,"idempotencyKey"`), []fr{{"extra", "unknown"}}},
		{"unknown nested", replace(t, `"rail":`, `"fee":0,"rail":`), []fr{{"terms.fee", "unknown"}}},
		{"unknown in envelope", replace(t, `"agent":`, `"kid":"x","agent":`), []fr{{"envelope.kid", "unknown"}}},
		{"duplicate", replace(t, `"payee":"acct:seller.example"`, `"payee":"acct:a.example","payee":"acct:seller.example"`), []fr{{"payee", "duplicate"}}},
		{"duplicate by escape", replace(t, `"payee":"acct:seller.example"`, `"payee":"acct:a.example","p\u0061yee":"acct:seller.example"`), []fr{{"payee", "duplicate"}}},
		{"duplicate nested", replace(t, `"minor":1250`, `"minor":1,"minor":1250`), []fr{{"amount.minor", "duplicate"}}},
		{"missing everything", `{}`, []fr{{"idempotencyKey", "required"}, {"payee", "required"}, {"amount.minor", "gt"},
			{"amount.currency", "required"}, {"purpose", "required"}, {"terms.rail", "required"},
			{"terms.reversibility", "required"}, {"terms.finality", "required"}, {"terms.credential", "required"},
			{"terms.capitalSource", "required"}, {"terms.presence", "required"}, {"envelope.agent", "required"},
			{"envelope.mandate", "required"}, {"envelope.signature", "required"}}},

		// Types.
		{"null string", replace(t, `"acct:seller.example"`, `null`), []fr{{"payee", "type"}}},
		{"number string", replace(t, `"acct:seller.example"`, `5`), []fr{{"payee", "type"}}},
		{"array string", replace(t, `"acct:seller.example"`, `["acct:x"]`), []fr{{"payee", "type"}}},
		{"amount string", replace(t, `{"minor":1250,"currency":"USD"}`, `"12.50 USD"`), []fr{{"amount", "type"}}},
		{"amount null", replace(t, `{"minor":1250,"currency":"USD"}`, `null`), []fr{{"amount", "type"}}},
		{"terms array", replace(t, `{"rail":"sandbox-card","reversibility":"reversible","finality":"instant",`+
			`"credential":"api-key","capitalSource":"payer","presence":"delegated"}`, `[]`), []fr{{"terms", "type"}}},
		{"enum number", replace(t, `"reversible"`, `1`), []fr{{"terms.reversibility", "type"}}},

		// amount.minor.
		{"minor 1.0", replace(t, `1250`, `1.0`), []fr{{"amount.minor", "integer"}}},
		{"minor 1250.5", replace(t, `1250`, `1250.5`), []fr{{"amount.minor", "integer"}}},
		{"minor 1e3", replace(t, `1250`, `1e3`), []fr{{"amount.minor", "integer"}}},
		{"minor 1E3", replace(t, `1250`, `1E3`), []fr{{"amount.minor", "integer"}}},
		{"minor 1e+3", replace(t, `1250`, `1e+3`), []fr{{"amount.minor", "integer"}}},
		{"minor -0", replace(t, `1250`, `-0`), []fr{{"amount.minor", "gt"}}},
		{"minor 0", replace(t, `1250`, `0`), []fr{{"amount.minor", "gt"}}},
		{"minor -5", replace(t, `1250`, `-5`), []fr{{"amount.minor", "gt"}}},
		{"minor 01", replace(t, `1250`, `01`), []fr{{"", "syntax"}}},
		{"minor +5", replace(t, `1250`, `+5`), []fr{{"", "syntax"}}},
		{"minor string", replace(t, `1250`, `"1250"`), []fr{{"amount.minor", "type"}}},
		{"minor null", replace(t, `1250`, `null`), []fr{{"amount.minor", "type"}}},
		{"minor true", replace(t, `1250`, `true`), []fr{{"amount.minor", "type"}}},
		{"minor 2^53", replace(t, `1250`, `9007199254740992`), []fr{{"amount.minor", "lt"}}},
		{"minor 2^63", replace(t, `1250`, `9223372036854775808`), []fr{{"amount.minor", "lt"}}},
		{"minor huge", replace(t, `1250`, strings.Repeat("9", 400)), []fr{{"amount.minor", "lt"}}},

		// Strings.
		{"key with space", replace(t, `"7f3c6a2e"`, `"7f3c 6a2e"`), []fr{{"idempotencyKey", "visibleascii"}}},
		{"key non-ASCII", replace(t, `"7f3c6a2e"`, `"clé"`), []fr{{"idempotencyKey", "printascii"}}},
		{"key tab", replace(t, `"7f3c6a2e"`, `"a\tb"`), []fr{{"idempotencyKey", "printascii"}}},
		{"key 256", replace(t, `"7f3c6a2e"`, `"`+strings.Repeat("k", 256)+`"`), []fr{{"idempotencyKey", "max"}}},
		{"key empty", replace(t, `"7f3c6a2e"`, `""`), []fr{{"idempotencyKey", "required"}}},
		{"payee no scheme", replace(t, `"acct:seller.example"`, `"seller.example"`), []fr{{"payee", "payee"}}},
		{"payee slash", replace(t, `"acct:seller.example"`, `"https://seller.example/"`), []fr{{"payee", "payee"}}},
		{"payee star", replace(t, `"acct:seller.example"`, `"*"`), []fr{{"payee", "payee"}}},
		{"payee upper scheme", replace(t, `"acct:seller.example"`, `"ACCT:seller.example"`), []fr{{"payee", "payee"}}},
		{"payee 256", replace(t, `"acct:seller.example"`, `"acct:`+strings.Repeat("s", 251)+`"`), []fr{{"payee", "max"}}},
		{"purpose 501", replace(t, `"invoice 1182"`, `"`+strings.Repeat("é", 501)+`"`), []fr{{"purpose", "max"}}},
		{"purpose spaces", replace(t, `"invoice 1182"`, `"   "`), []fr{{"purpose", "required"}}},
		{"purpose NUL", replace(t, `"invoice 1182"`, `"a\u0000b"`), []fr{{"purpose", "text"}}},
		{"purpose newline", replace(t, `"invoice 1182"`, `"a\nb"`), []fr{{"purpose", "text"}}},
		{"purpose RLO", replace(t, `"invoice 1182"`, `"pay \u202eexe.txt"`), []fr{{"purpose", "text"}}},
		{"purpose C1", replace(t, `"invoice 1182"`, `"a\u0085b"`), []fr{{"purpose", "text"}}},
		{"lone high surrogate", replace(t, `"invoice 1182"`, `"a\ud800b"`), []fr{{"purpose", "utf8"}}},
		{"lone low surrogate", replace(t, `"invoice 1182"`, `"a\udc00"`), []fr{{"purpose", "utf8"}}},
		{"high surrogate at end", replace(t, `"invoice 1182"`, `"a\ud83d"`), []fr{{"purpose", "utf8"}}},
		{"upper-case lone surrogate", replace(t, `"invoice 1182"`, `"a\uD800b"`), []fr{{"purpose", "utf8"}}},
		{"reversed pair", replace(t, `"invoice 1182"`, `"\ude00\ud83d"`), []fr{{"purpose", "utf8"}}},
		{"currency lower", replace(t, `"USD"`, `"usd"`), []fr{{"amount.currency", "currency"}}},
		{"currency short", replace(t, `"USD"`, `"US"`), []fr{{"amount.currency", "min"}}},
		{"currency four", replace(t, `"USD"`, `"USDT"`), []fr{{"amount.currency", "currency"}}},
		{"rail upper", replace(t, `"sandbox-card"`, `"Sandbox-Card"`), []fr{{"terms.rail", "rail"}}},
		{"rail 65", replace(t, `"sandbox-card"`, `"`+strings.Repeat("r", 65)+`"`), []fr{{"terms.rail", "max"}}},
		{"reversibility", replace(t, `"reversible"`, `"maybe"`), []fr{{"terms.reversibility", "oneof"}}},
		{"finality", replace(t, `"instant"`, `"Instant"`), []fr{{"terms.finality", "oneof"}}},
		{"credential", replace(t, `"api-key"`, `"password"`), []fr{{"terms.credential", "oneof"}}},
		{"capitalSource", replace(t, `"payer"`, `"loan"`), []fr{{"terms.capitalSource", "oneof"}}},
		{"presence", replace(t, `"delegated"`, `"absent"`), []fr{{"terms.presence", "oneof"}}},
		{"agent upper", replace(t, testAgent, strings.ToUpper(testAgent)), []fr{{"envelope.agent", "lowercase"}}},
		{"agent short", replace(t, testAgent, testAgent[:63]), []fr{{"envelope.agent", "len"}}},
		{"agent 0x", replace(t, testAgent, "0x"+testAgent[:62]), []fr{{"envelope.agent", "hexadecimal"}}},
		{"agent not hex", replace(t, testAgent, strings.Repeat("g", 64)), []fr{{"envelope.agent", "hexadecimal"}}},
		{"mandate not JWS", replace(t, `"aGVhZA.cGF5bG9hZA.c2ln"`, `"token"`), []fr{{"envelope.mandate", "jwt"}}},
		{"mandate too long", replace(t, `"aGVhZA.cGF5bG9hZA.c2ln"`, `"a.`+strings.Repeat("b", MaxMandateLen)+`.c"`), []fr{{"envelope.mandate", "max"}}},
		{"signature two parts", replace(t, `"aGVhZA..c2ln"`, `"aGVhZA.c2ln"`), []fr{{"envelope.signature", "jws"}}},
		{"signature no sig", replace(t, `"aGVhZA..c2ln"`, `"aGVhZA.."`), []fr{{"envelope.signature", "jws"}}},
		{"signature padding", replace(t, `"aGVhZA..c2ln"`, `"aGVhZA==..c2ln"`), []fr{{"envelope.signature", "jws"}}},
		{"signature too long", replace(t, `"aGVhZA..c2ln"`, `"a..`+strings.Repeat("b", MaxSignatureLen)+`"`), []fr{{"envelope.signature", "max"}}},

		// Several at once, in the order of the fields, unknown last.
		{"several", `{"zzz":1,"envelope":{"agent":"x"},"amount":{"minor":1.5,"currency":"usd"},"aaa":2,` +
			`"payee":"p","idempotencyKey":"k","purpose":"p","terms":{"rail":"r","reversibility":"reversible",` +
			`"finality":"instant","credential":"dpop","capitalSource":"escrow","presence":"present"}}`,
			[]fr{{"payee", "payee"}, {"amount.minor", "integer"}, {"amount.currency", "currency"},
				{"envelope.agent", "len"}, {"envelope.mandate", "required"}, {"envelope.signature", "required"},
				{"aaa", "unknown"}, {"zzz", "unknown"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in, err := DecodeInstruction([]byte(tt.body))
			if in != nil {
				t.Errorf("returned an instruction with error %v", err)
			}
			var me *MalformedError
			if !errors.As(err, &me) {
				t.Fatalf("error = %v, want *MalformedError", err)
			}
			if !errors.Is(err, ErrMalformed) || me.Code() != CodeMalformed || errors.Is(err, ErrUnauthorized) {
				t.Errorf("error %v: wrong sentinel or code", err)
			}
			var got []fr
			for _, f := range me.Fields {
				got = append(got, fr{f.Field, f.Rule})
				if f.Message == "" {
					t.Errorf("%s/%s has no message", f.Field, f.Rule)
				}
			}
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(fr{})); diff != "" {
				t.Errorf("fields (-want +got):\n%s\nerror: %v", diff, err)
			}
		})
	}
}

func TestDecodeInstructionEdgesAccepted(t *testing.T) {
	for name, body := range map[string]string{
		"minor 1":             replace(t, `1250`, `1`),
		"minor 2^53-1":        replace(t, `1250`, `9007199254740991`),
		"purpose 500 runes":   replace(t, `"invoice 1182"`, `"`+strings.Repeat("€", 500)+`"`),
		"purpose emoji pair":  replace(t, `"invoice 1182"`, `"ok \ud83d\ude00"`),
		"purpose upper pair":  replace(t, `"invoice 1182"`, `"ok \uD83D\uDE00"`),
		"purpose escaped":     replace(t, `"invoice 1182"`, `"a\\u0000b \"q\""`),
		"key 255":             replace(t, `"7f3c6a2e"`, `"`+strings.Repeat("k", 255)+`"`),
		"key punctuation":     replace(t, `"7f3c6a2e"`, `"!~{}[]\"\\"`),
		"payee 255":           replace(t, `"acct:seller.example"`, `"acct:`+strings.Repeat("s", 250)+`"`),
		"payee CAIP-10":       replace(t, `"acct:seller.example"`, `"eip155:1:0xab16a96D359eC26a11e2C2b3d8f8B8942d5Bfcdb"`),
		"currency CAIP-19":    replace(t, `"USD"`, `"eip155:1/erc20:0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48"`),
		"every enum value":    replace(t, `"reversibility":"reversible","finality":"instant","credential":"api-key","capitalSource":"payer","presence":"delegated"`, `"reversibility":"irreversible","finality":"deferred","credential":"dpop","capitalSource":"credit","presence":"present"`),
		"embedded signature":  replace(t, `"aGVhZA..c2ln"`, `"aGVhZA.cGF5bG9hZA.c2ln"`),
		"escaped member name": replace(t, `"payee"`, `"\u0070ayee"`),
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := DecodeInstruction([]byte(body)); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestDecodeInstructionErrorCap(t *testing.T) {
	var b strings.Builder
	b.WriteString("{")
	for i := range 1000 {
		fmt.Fprintf(&b, `"u%d":1,`, i)
	}
	b.WriteString(`"x":1}`)
	_, err := DecodeInstruction([]byte(b.String()))
	var me *MalformedError
	if !errors.As(err, &me) {
		t.Fatal(err)
	}
	if len(me.Fields) > maxFieldErrors {
		t.Errorf("%d field errors, want at most %d", len(me.Fields), maxFieldErrors)
	}
	long := strings.Repeat("n", 10000)
	_, err = DecodeInstruction([]byte(replace(t, `{"idempotencyKey"`, `{"`+long+`":1,"idempotencyKey"`)))
	if errors.As(err, &me); len(me.Fields[0].Field) > maxReportedNameLen+4 {
		t.Errorf("reported a %d-byte field name", len(me.Fields[0].Field))
	}
}

func TestCheckGoValues(t *testing.T) {
	f := newFixture(t)
	in := f.signed(t)
	if err := in.Check(); err != nil {
		t.Fatal(err)
	}
	in.Amount.Minor = 0
	in.Terms.Presence = ""
	in.Envelope.Signature = ""
	err := in.Check()
	var me *MalformedError
	if !errors.As(err, &me) {
		t.Fatal(err)
	}
	var got []string
	for _, f := range me.Fields {
		got = append(got, f.Field+"/"+f.Rule)
	}
	want := []string{"amount.minor/gt", "terms.presence/required", "envelope.signature/required"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if !strings.Contains(err.Error(), "amount.minor must be greater than 0") {
		t.Errorf("message: %v", err)
	}
}

func TestInstructionJSONRoundTrip(t *testing.T) {
	f := newFixture(t)
	in := f.signed(t)
	in.Purpose = `<script> & "quotes" é`
	if err := SignInstruction(in, f.agentKey); err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	back, err := DecodeInstruction(b)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(in, back); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if err := VerifyInstruction(back); err != nil {
		t.Errorf("verify after round trip: %v", err)
	}
}

func TestValidCurrency(t *testing.T) {
	for s, want := range map[string]bool{
		"USD": true, "EUR": true, "XAU": true,
		"usd": false, "US": false, "USDC": false, "U$D": false, "": false, "ÜSD": false,
		"eip155:1/erc20:0xa0b86991c6218b36c1d19d4a2e9eb0ce3606eb48": true,
		"eip155:1/slip44:60": true,
		"bip122:000000000019d6689c085ae165831e93/slip44:0":                    true,
		"cosmos:Binance-Chain-Tigris/slip44:714":                              true,
		"eip155:1/erc721:0x06012c8cf97BEaD5deAe237070F9587f8E7A266d/771769":   true,
		"hedera:mainnet/nft:0.0.55492/12":                                     true,
		"solana:5eykt4UsFv8P8NJdTREpY1vzqKqZKvdp/token:EPjFWdd5AufqSSqeM2qN1": true,
		"chainstd:8c3444cf8970a9e41a706fab93e7a6c4/slip44:0":                  true,
		"eip155:1/erc20:a%2Fb":                                                true,
		"eip155:1":                                                            false, // chain only
		"eip155:1/erc20":                                                      false, // no asset reference
		"/slip44:60":                                                          false,
		"ethereum/slip44:60":                                                  false,
		"EIP155:1/slip44:60":                                                  false, // namespace is lower-case
		"eip155:1/ERC20:0xa0":                                                 false,
		"ei:1/slip44:60":                                                      false, // namespace too short
		"eip155123:1/slip44:60":                                               false, // namespace too long
		"eip155:1/sl:60":                                                      false,
		"eip155:" + strings.Repeat("1", 33) + "/slip44:60":                    false,
		"eip155:1/slip44:" + strings.Repeat("6", 129):                         false,
		"eip155:1/slip44:" + strings.Repeat("6", 128):                         true,
		"eip155:1/erc721:0x06/" + strings.Repeat("7", 79):                     false,
		"eip155:1/erc721:0x06/" + strings.Repeat("7", 78):                     true,
		"eip155:1/erc721:0x06/1/2":                                            false, // serial numbers refused
		"eip155:1/erc20:0xa0/":                                                false,
		"eip155:1/erc20:0x a0":                                                false,
		"eip155:1/erc20:0x:a0":                                                false,
		"eip155:1.5/erc20:0xa0":                                               false,
		"eip155:1/erc20:0xa0 ":                                                false,
	} {
		if got := ValidCurrency(s); got != want {
			t.Errorf("ValidCurrency(%q) = %v, want %v", s, got, want)
		}
	}
	longest := "abcdefgh:" + strings.Repeat("r", 32) + "/abcdefgh:" + strings.Repeat("a", 128) + "/" + strings.Repeat("t", 78)
	if len(longest) != MaxCurrencyLen || !ValidCurrency(longest) {
		t.Errorf("longest currency: len %d, valid %v", len(longest), ValidCurrency(longest))
	}
}

func TestGateInput(t *testing.T) {
	f := newFixture(t)
	in := f.signed(t)
	m, err := VerifyEnvelope(in, f.verifier)
	if err != nil {
		t.Fatal(err)
	}
	gi := in.GateInput(m)
	gi.Policy = gate.Policy{Rails: map[string]gate.RailFacts{
		"sandbox-card": {Reversibility: gate.Reversible, Finality: gate.FinalityInstant},
	}}
	d := gate.Decide(gi)
	if d.Outcome != gate.Allow || d.MandateID != "mdt_01JDEMO" {
		t.Errorf("decision = %+v", d)
	}
	if gi.Agent != f.agent || gi.Payee != in.Payee || gi.Amount != 1250 || gi.Currency != "USD" ||
		gi.Terms.Rail != "sandbox-card" || gi.Terms.Presence != gate.PresenceDelegated {
		t.Errorf("input = %+v", gi)
	}
}

func BenchmarkDecodeInstruction(b *testing.B) {
	f := newFixture(b)
	body, err := json.Marshal(f.signed(b))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		if _, err := DecodeInstruction(body); err != nil {
			b.Fatal(err)
		}
	}
}
