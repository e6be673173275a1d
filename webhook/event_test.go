package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"
)

func TestDerive(t *testing.T) {
	e := newEnv(t, envOptions{})
	tests := []struct {
		typ   string
		data  string
		kinds []string
	}{
		{"gate.decision", `{"outcome":"allow","reasons":[]}`, []string{EventGateDecision, EventAuditAppended}},
		{"gate.decision", `{"outcome":"deny","reasons":[{"code":"over_cap"}]}`, []string{EventGateDecision, EventIntentDenied, EventAuditAppended}},
		{"gate.decision", `{"outcome":"confirm","reasons":[{"code":"confirm_threshold"}]}`, []string{EventGateDecision, EventApprovalPending, EventAuditAppended}},
		{"gate.decision", `{"stage":"auth"}`, []string{EventGateDecision, EventAuditAppended}},
		{"gate.decision", `{"outcome":7}`, []string{EventGateDecision, EventAuditAppended}},
		{"gate.decision", "", []string{EventGateDecision, EventAuditAppended}},
		{"payment.settled", `{"amount":{"minor":"1250","currency":"USD"}}`, []string{EventPaymentSettled, EventAuditAppended}},
		{"payment.failed", `{"code":"declined"}`, []string{EventAuditAppended}},
		{"memory.recorded", `{"id":"mem_1"}`, []string{EventMemoryRecorded, EventAuditAppended}},
		{"memory.consolidated", `{}`, []string{EventMemoryConsolidated, EventAuditAppended}},
		{"memory.erased", `{}`, []string{EventMemoryErased, EventAuditAppended}},
		{"memory.tainted", `{}`, []string{EventMemoryTainted, EventAuditAppended}},
		{"agent.created", `{"id":"ak_1"}`, []string{EventAuditAppended}},
		// An operator's decision on a held payment is no kind of its own,
		// whichever it is: what follows an approval is payment.settled.
		{"approval.granted", `{"approvalsReceived":1}`, []string{EventAuditAppended}},
		{"approval.expired", `{"approvalsReceived":0}`, []string{EventAuditAppended}},
		{"approval.declined", `{"mandateId":"mdt-1"}`, []string{EventAuditAppended}},
		{"intent.denied", `{}`, []string{EventAuditAppended}}, // not an entry type: only the gate derives it
	}
	for _, tt := range tests {
		t.Run(tt.typ+"/"+tt.data, func(t *testing.T) {
			ent := e.append(tt.typ, tt.data)
			evs := Derive(ent)
			var kinds []string
			at, err := time.Parse(time.RFC3339Nano, ent.At)
			if err != nil {
				t.Fatal(err)
			}
			for _, ev := range evs {
				kinds = append(kinds, ev.Type)
				if want := "evt_" + strconv.FormatUint(ent.Seq, 10) + "_" + ev.Type; ev.ID != want {
					t.Errorf("id %q, want %q", ev.ID, want)
				}
				if ev.Sequence != ent.Seq || !ev.CreatedAt.Equal(at) || ev.CreatedAt.Location() != time.UTC {
					t.Errorf("sequence %d createdAt %v, entry %d %s", ev.Sequence, ev.CreatedAt, ent.Seq, ent.At)
				}
				wantData := string(ent.Data)
				if wantData == "" {
					wantData = "{}"
				}
				if string(ev.Data) != wantData {
					t.Errorf("data %s, want %s", ev.Data, wantData)
				}
				if ev.Entry.Hash != ent.Hash || ev.Entry.Sig != ent.Sig || ev.Entry.Seq != ent.Seq {
					t.Errorf("entry is not the whole signed entry")
				}
			}
			if !slices.Equal(kinds, tt.kinds) {
				t.Fatalf("kinds %v, want %v", kinds, tt.kinds)
			}
			if !slices.Equal(deriveKinds(ent), kinds) {
				t.Fatalf("deriveKinds disagrees with Derive")
			}
			// Pure: deriving again gives identical JSON.
			a, _ := json.Marshal(evs)
			b, _ := json.Marshal(Derive(ent))
			if string(a) != string(b) {
				t.Fatal("Derive is not deterministic")
			}
		})
	}
}

func TestEventJSONMembers(t *testing.T) {
	e := newEnv(t, envOptions{})
	ent := e.append("payment.settled", `{"x":1}`)
	b, err := json.Marshal(Derive(ent)[0])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{"createdAt", "data", "entry", "id", "sequence", "type"}; !slices.Equal(keys, want) {
		t.Fatalf("members %v, want %v", keys, want)
	}
	// createdAt is the same instant as the entry's at (encoding/json may
	// drop trailing zero digits of the fraction).
	var got time.Time
	if err := json.Unmarshal(m["createdAt"], &got); err != nil {
		t.Fatal(err)
	}
	if at, _ := time.Parse(time.RFC3339Nano, ent.At); !got.Equal(at) {
		t.Fatalf("createdAt %s, entry at %s", m["createdAt"], ent.At)
	}
}

func TestKinds(t *testing.T) {
	ks := Kinds()
	if len(ks) != 12 {
		t.Fatalf("%d kinds", len(ks))
	}
	for _, k := range ks {
		if !knownKind(k.Name) || k.Description == "" || k.Payload.Name() != "Event" {
			t.Errorf("kind %+v", k)
		}
	}
	if knownKind(AllEvents) || knownKind("payment.failed") {
		t.Fatal("knownKind too broad")
	}
}

func TestParseEventID(t *testing.T) {
	tests := []struct {
		in   string
		seq  uint64
		kind string
		ok   bool
	}{
		{"evt_1_audit.appended", 1, EventAuditAppended, true},
		{"evt_18446744073709551615_gate.decision", 18446744073709551615, EventGateDecision, true},
		{"evt_18446744073709551616_gate.decision", 0, "", false},
		{"evt_0_audit.appended", 0, "", false},
		{"evt_01_audit.appended", 0, "", false},
		{"evt_+1_audit.appended", 0, "", false},
		{"evt_1_payment.failed", 0, "", false},
		{"evt_1_*", 0, "", false},
		{"evt__audit.appended", 0, "", false},
		{"evt_1", 0, "", false},
		{"ev_1_audit.appended", 0, "", false},
		{"", 0, "", false},
	}
	for _, tt := range tests {
		seq, kind, ok := ParseEventID(tt.in)
		if seq != tt.seq || kind != tt.kind || ok != tt.ok {
			t.Errorf("ParseEventID(%q) = %d, %q, %v", tt.in, seq, kind, ok)
		}
	}
}

func FuzzParseEventID(f *testing.F) {
	f.Add("evt_42_gate.decision")
	f.Add("evt_0_x")
	f.Add("evt_1_memory.tainted")
	f.Fuzz(func(t *testing.T, s string) {
		seq, kind, ok := ParseEventID(s)
		if !ok {
			return
		}
		if seq == 0 || !knownKind(kind) || EventID(seq, kind) != s {
			t.Fatalf("ParseEventID(%q) = %d, %q: does not round-trip", s, seq, kind)
		}
	})
}

// FuzzCursor feeds untrusted cursors to both listings: they either work
// or fail with ErrBadCursor, and never panic.
func FuzzCursor(f *testing.F) {
	e := newEnv(f, envOptions{})
	c := e.create("https://a.example/", AllEvents)
	e.create("https://b.example/", AllEvents)
	e.append("gate.decision", `{"outcome":"deny"}`)
	e.d.tail(context.Background())
	p, _ := e.d.Deliveries(context.Background(), c.ID, "", 1)
	f.Add(*p.NextCursor)
	lp, _ := e.eps.List(context.Background(), "", 1)
	f.Add(*lp.NextCursor)
	f.Add("")
	f.Add("AAAAAAAAAAA")
	f.Fuzz(func(t *testing.T, cursor string) {
		ctx := context.Background()
		if _, err := e.eps.List(ctx, cursor, 0); err != nil && !errors.Is(err, ErrBadCursor) {
			t.Fatalf("List(%q) = %v", cursor, err)
		}
		if _, err := e.d.Deliveries(ctx, c.ID, cursor, 0); err != nil && !errors.Is(err, ErrBadCursor) {
			t.Fatalf("Deliveries(%q) = %v", cursor, err)
		}
	})
}
