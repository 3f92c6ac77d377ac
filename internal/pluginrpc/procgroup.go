package pluginrpc

import (
	"os/exec"
	"syscall"
	"time"
)

// A plugin process runs in a process group of its own (Setpgid), so that
// a signal sent to the host's group (a terminal's Ctrl-C, systemd's
// KillMode=control-group SIGTERM, `kill -TERM -- -PGID`) reaches the host
// alone: the host stops its plugins itself, in order, after its own last
// checkpoint. Were the plugin to get the same SIGTERM it would exit under
// the host's shutdown and make it unclean.
//
// The group also bounds what the plugin leaves behind: whatever the
// plugin started (a shell script's children) is in it, and killGroup ends
// all of it, so a grandchild holding the plugin's stdout cannot keep the
// host waiting for the pipe to close.

// ownGroup puts cmd's process in a new process group.
func ownGroup(cmd *exec.Cmd) {
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
}

// killGroup sends SIGKILL to the process group of cmd's process (see
// ownGroup); nothing when there is no process. It must not run
// concurrently with cmd.Start.
func killGroup(cmd *exec.Cmd) {
	if cmd != nil && cmd.Process != nil {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	}
}

// killGroupAfter is how long Client.Kill lets go-plugin's own kill (a
// graceful shutdown, then SIGKILL of the plugin after 2 s) run before it
// kills the plugin's whole group.
const killGroupAfter = 5 * time.Second
