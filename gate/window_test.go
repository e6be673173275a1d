package gate

import (
	"testing"
	"time"
)

func ts(s string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		panic(err)
	}
	return t
}

func TestPeriodWindow(t *testing.T) {
	tests := []struct {
		p          Period
		at         string
		start, end string
	}{
		// Days.
		{Day, "2026-11-22T00:00:00Z", "2026-11-22T00:00:00Z", "2026-11-23T00:00:00Z"},
		{Day, "2026-11-22T23:59:59.999999999Z", "2026-11-22T00:00:00Z", "2026-11-23T00:00:00Z"},
		{Day, "2026-12-31T12:00:00Z", "2026-12-31T00:00:00Z", "2027-01-01T00:00:00Z"},
		{Day, "2024-02-28T23:00:00Z", "2024-02-28T00:00:00Z", "2024-02-29T00:00:00Z"},
		{Day, "2024-02-29T10:00:00Z", "2024-02-29T00:00:00Z", "2024-03-01T00:00:00Z"},
		// Another zone: 01:00 at +02:00 is 23:00 UTC the day before.
		{Day, "2024-03-01T01:00:00+02:00", "2024-02-29T00:00:00Z", "2024-03-01T00:00:00Z"},

		// ISO weeks start on Monday 00:00 UTC.
		{Week, "2026-11-22T23:59:59Z", "2026-11-16T00:00:00Z", "2026-11-23T00:00:00Z"}, // Sunday
		{Week, "2026-11-23T00:00:00Z", "2026-11-23T00:00:00Z", "2026-11-30T00:00:00Z"}, // Monday
		{Week, "2026-11-25T12:00:00Z", "2026-11-23T00:00:00Z", "2026-11-30T00:00:00Z"}, // Wednesday
		{Week, "2026-11-23T00:30:00+01:00", "2026-11-16T00:00:00Z", "2026-11-23T00:00:00Z"},
		// Across the year: 2020-12-28 (Monday) to 2021-01-04 is ISO week 2020-W53.
		{Week, "2020-12-31T10:00:00Z", "2020-12-28T00:00:00Z", "2021-01-04T00:00:00Z"},
		{Week, "2021-01-03T23:59:59Z", "2020-12-28T00:00:00Z", "2021-01-04T00:00:00Z"},
		{Week, "2021-01-04T00:00:00Z", "2021-01-04T00:00:00Z", "2021-01-11T00:00:00Z"},
		// 2025-12-29 (Monday) to 2026-01-05 is ISO week 2026-W01.
		{Week, "2026-01-01T00:00:00Z", "2025-12-29T00:00:00Z", "2026-01-05T00:00:00Z"},
		// Across a leap day.
		{Week, "2024-03-01T00:00:00Z", "2024-02-26T00:00:00Z", "2024-03-04T00:00:00Z"},

		// Calendar months.
		{Month, "2026-01-31T23:59:59Z", "2026-01-01T00:00:00Z", "2026-02-01T00:00:00Z"},
		{Month, "2026-02-01T00:00:00Z", "2026-02-01T00:00:00Z", "2026-03-01T00:00:00Z"},
		{Month, "2024-02-29T23:59:59.999999999Z", "2024-02-01T00:00:00Z", "2024-03-01T00:00:00Z"},
		{Month, "2023-02-28T12:00:00Z", "2023-02-01T00:00:00Z", "2023-03-01T00:00:00Z"},
		{Month, "2026-04-30T12:00:00Z", "2026-04-01T00:00:00Z", "2026-05-01T00:00:00Z"},
		{Month, "2026-12-31T23:59:59Z", "2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z"},
		{Month, "2027-01-01T00:00:00Z", "2027-01-01T00:00:00Z", "2027-02-01T00:00:00Z"},
		{Month, "2027-01-01T00:30:00+01:00", "2026-12-01T00:00:00Z", "2027-01-01T00:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(string(tt.p)+" "+tt.at, func(t *testing.T) {
			start, end := PeriodWindow(tt.p, ts(tt.at))
			if !start.Equal(ts(tt.start)) || !end.Equal(ts(tt.end)) {
				t.Errorf("window = [%s, %s), want [%s, %s)", start, end, tt.start, tt.end)
			}
			if start.Location() != time.UTC || end.Location() != time.UTC {
				t.Error("window not in UTC")
			}
			at := ts(tt.at)
			if at.Before(start) || !at.Before(end) {
				t.Errorf("%s not in its own window", at)
			}
		})
	}
	if s, e := PeriodWindow("year", ts("2026-01-01T00:00:00Z")); !s.IsZero() || !e.IsZero() {
		t.Errorf("unknown period gave [%s, %s)", s, e)
	}
}

// TestPeriodWindowsTile checks, hour by hour over four years, that the
// windows of each period tile time: consecutive, contiguous, and each
// containing the instants that map to it.
func TestPeriodWindowsTile(t *testing.T) {
	for _, p := range []Period{Day, Week, Month} {
		t0 := ts("2023-01-01T00:00:00Z")
		prevStart, prevEnd := PeriodWindow(p, t0)
		for at := t0; at.Year() < 2027; at = at.Add(time.Hour) {
			start, end := PeriodWindow(p, at)
			if at.Before(start) || !at.Before(end) {
				t.Fatalf("%s: %s outside [%s, %s)", p, at, start, end)
			}
			if !start.Equal(prevStart) {
				if !start.Equal(prevEnd) {
					t.Fatalf("%s: gap or overlap: [%s, %s) then [%s, %s)", p, prevStart, prevEnd, start, end)
				}
				prevStart, prevEnd = start, end
			}
			if p == Week && start.Weekday() != time.Monday {
				t.Fatalf("week starts on %s", start.Weekday())
			}
		}
	}
}

func TestVelocityWindow(t *testing.T) {
	now := ts("2026-11-22T10:00:00Z")
	start, end := VelocityWindow(Velocity{Count: 3, Seconds: 60}, now)
	if !start.Equal(ts("2026-11-22T09:59:00Z")) || !end.Equal(now) {
		t.Errorf("window = [%s, %s]", start, end)
	}
	start, end = VelocityWindow(Velocity{}, now)
	if !start.Equal(now) || !end.Equal(now) {
		t.Errorf("zero velocity window = [%s, %s]", start, end)
	}
	// Out-of-range seconds are clamped, never overflowing.
	start, _ = VelocityWindow(Velocity{Count: 1, Seconds: 1 << 62}, now)
	if !start.Equal(now.Add(-MaxVelocitySeconds * time.Second)) {
		t.Errorf("clamped start = %s", start)
	}
}
