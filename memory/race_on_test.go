//go:build race

package memory

// raceDetector is true when the tests run under the race detector, which
// slows the store's JSON and canonicalization work about tenfold: the
// property and tamper tests then run fewer cases by default.
const raceDetector = true
