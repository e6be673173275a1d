package gate

import "time"

// MaxVelocitySeconds is the longest velocity window: 31 days. Longer
// windows belong in the period cap; this bound keeps the history storage
// must scan for a velocity count short.
const MaxVelocitySeconds = 31 * 24 * 60 * 60

// PeriodWindow returns the UTC calendar window of period p that contains t,
// as the half-open interval [start, end):
//
//   - Day: from 00:00:00 UTC of t's day to 00:00:00 UTC of the next day.
//   - Week: from Monday 00:00:00 UTC (ISO 8601 weeks) to the next Monday, so
//     Sunday 23:59:59 belongs to the week that started six days before and
//     Monday 00:00:00 starts a new one; a week may span two years.
//   - Month: from the 1st 00:00:00 UTC to the 1st of the next month.
//
// t is converted to UTC first, whatever its location. Storage keys the
// period counters by start, so two times get the same counter exactly when
// they get the same start. For a p that is not a defined [Period] both
// results are the zero time; [Decide] denies such a mandate, and mandates
// are verified before they get here.
func PeriodWindow(p Period, t time.Time) (start, end time.Time) {
	t = t.UTC()
	y, m, d := t.Date()
	switch p {
	case Day:
		start = time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
		return start, start.AddDate(0, 0, 1)
	case Week:
		sinceMonday := (int(t.Weekday()) + 6) % 7 // Monday 0 .. Sunday 6
		start = time.Date(y, m, d-sinceMonday, 0, 0, 0, 0, time.UTC)
		return start, start.AddDate(0, 0, 7)
	case Month:
		start = time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
		return start, start.AddDate(0, 1, 0)
	}
	return time.Time{}, time.Time{}
}

// VelocityWindow returns the rolling window of v that ends at now, as the
// closed interval [start, end] with start = now − v.Seconds and end = now: a
// payment counts toward [Counters.VelocityCount] when its decision time t
// satisfies start ≤ t ≤ end. Both ends are included, so a payment made
// exactly v.Seconds ago still counts (the stricter reading), and so does one
// decided concurrently at the same instant. For the zero Velocity (no limit)
// both results are now.
func VelocityWindow(v Velocity, now time.Time) (start, end time.Time) {
	secs := min(max(v.Seconds, 0), MaxVelocitySeconds) // never overflows a Duration
	return now.Add(-time.Duration(secs) * time.Second), now
}
