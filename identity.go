package entflake

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"hash/fnv"
	"os"
	"strconv"
	"unicode/utf8"

	"github.com/entflake/entflake/schema"
)

// The instance tag names one generator in the slot it holds and in the
// service's audit row: service@host@pid@start-millis@random. The lease
// tells its own writes from another holder's by the tag (a claim whose
// answer was lost is read back and kept only if the slot shows this tag;
// renewals and the release name it), so no two generators may ever share
// one: two generators opened in the same millisecond of one process (two
// ent clients, tests) had the same service@host@pid@ms, and one of them
// could credit the other's claim to itself and hold the same worker id
// for good. The random part (64 bits from crypto/rand) makes each tag
// unique to its generator; it and the fields after the host are never cut.
// To fit the column (schema.InstanceSize characters), the host is
// shortened instead, always to the same text for the same service and host,
// so that the takeover prefix service@host@ of a crash-restarted pod still
// matches its previous incarnation's tag.

// randomHex is the number of hex digits of the tag's random part: 64 bits.
const randomHex = 16

// Widest forms of the fields after the host: a decimal pid and a
// millisecond time of at most this many digits. The host's room is
// reckoned with these widths, not the actual ones, so that it does not
// change with the pid or the time of a start.
const (
	pidDigits    = 10
	millisDigits = 13
)

// hostIdentity names this host the way an orchestrator does: POD_NAME (set
// through Kubernetes' downward API), HOSTNAME (a container's id or name), or
// the kernel's host name. In containers every process is often PID 1, so the
// host is what tells replicas apart.
func hostIdentity() string {
	for _, env := range []string{"POD_NAME", "HOSTNAME"} {
		if v := os.Getenv(env); v != "" {
			return v
		}
	}
	if h, err := os.Hostname(); err == nil && h != "" {
		return h
	}
	return "unknown-host"
}

// instancePrefix is the start of every tag of service on host: the part a
// takeover of the same pod's slot matches (lease.Request.TakeOver).
func instancePrefix(service, host string) string {
	return service + "@" + shortHost(service, host) + "@"
}

// instanceTag returns a new tag for a generator of service on host.
func instanceTag(service, host string, pid int, startMs int64) (string, error) {
	var b [randomHex / 2]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("entflake: instance tag: %w", err)
	}
	return instancePrefix(service, host) + strconv.Itoa(pid) + "@" + strconv.FormatInt(startMs, 10) + "@" +
		hex.EncodeToString(b[:]), nil
}

// shortHost is host, or, when the tag would not fit the column, its first
// characters, a '~' and 8 hex digits of a hash of the whole host (FNV-1a),
// so that two long hosts with the same beginning still differ.
func shortHost(service, host string) string {
	// service@host@pid@ms@random: four separators.
	room := schema.InstanceSize - utf8.RuneCountInString(service) - 4 - pidDigits - millisDigits - randomHex
	if utf8.RuneCountInString(host) <= room {
		return host
	}
	h := fnv.New32a()
	h.Write([]byte(host))
	suffix := fmt.Sprintf("~%08x", h.Sum32())
	keep := room - len(suffix)
	n := 0
	for i := range host {
		if n == keep {
			return host[:i] + suffix
		}
		n++
	}
	return host + suffix // not reached: host has more than room runes
}
