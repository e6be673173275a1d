//go:build !unix

package main

import (
	"errors"
	"io/fs"
)

// statfsUsage is not available here: the disk check reports it.
func statfsUsage(string) (diskUsage, error) {
	return diskUsage{}, errors.New("free disk space is only measured on Unix systems")
}

// fileUID is not available here: ownership is not checked.
func fileUID(fs.FileInfo) (int, bool) { return 0, false }
