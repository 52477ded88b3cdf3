//go:build !unix

package mcp

import "os/exec"

func setProcessGroup(*exec.Cmd) {}

// signalGroup kills the server process; without process groups there is no gentler signal.
func signalGroup(cmd *exec.Cmd, _ bool) {
	if cmd.Process != nil {
		_ = cmd.Process.Kill()
	}
}
