//go:build unix

package main

import (
	"io/fs"
	"syscall"
)

// statfsUsage reads the file system holding path with statfs(2) and names
// its device from /proc/self/mountinfo when there is one.
func statfsUsage(path string) (diskUsage, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return diskUsage{}, err
	}
	bs := uint64(st.Bsize)
	u := diskUsage{avail: uint64(st.Bavail) * bs, total: uint64(st.Blocks) * bs}
	u.device, u.mount = mountOf(path)
	return u, nil
}

func fileUID(info fs.FileInfo) (int, bool) {
	st, ok := info.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return int(st.Uid), true
}
