package ids

import "testing"

func TestNewIsValidAndIncreasing(t *testing.T) {
	prev := ""
	for i := 0; i < 1000; i++ {
		id := New(Intent)
		if !Valid(Intent, id) {
			t.Fatalf("New minted invalid id %q", id)
		}
		if id <= prev {
			t.Fatalf("ids not increasing: %q then %q", prev, id)
		}
		prev = id
	}
}

func TestValid(t *testing.T) {
	for _, tc := range []struct {
		prefix, s string
		want      bool
	}{
		{Intent, "int_01JABCDEFGHJKMNPQRSTVWXYZ0", true},
		{Intent, "rcpt_01JABCDEFGHJKMNPQRSTVWXYZ0", false},
		{Intent, "int_01JABCDEFGHJKMNPQRSTVWXYZ", false},
		{Intent, "int_01JABCDEFGHJKMNPQRSTVWXYZ0X", false},
		{Intent, "int_01JABCDEFGHJKMNPQRSTVWXYZU", false}, // U is not Crockford base32
		{Intent, "", false},
		{AgentKey, "ak_01JABCDEFGHJKMNPQRSTVWXYZ0", true},
	} {
		if got := Valid(tc.prefix, tc.s); got != tc.want {
			t.Errorf("Valid(%q, %q) = %v, want %v", tc.prefix, tc.s, got, tc.want)
		}
	}
}
