package pebblestore_test

import "runtime"

func gomaxprocs() int { return runtime.GOMAXPROCS(0) }

// pebbleQuiet is a pebble.Logger that drops everything but fatal errors.
type pebbleQuiet struct{}

func (pebbleQuiet) Infof(string, ...any)           {}
func (pebbleQuiet) Errorf(string, ...any)          {}
func (pebbleQuiet) Fatalf(format string, a ...any) { panic(format) }
