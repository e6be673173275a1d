//go:build !race

package memory

// raceDetector is true when the tests run under the race detector.
const raceDetector = false
