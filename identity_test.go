package entflake

import (
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake/internal/dbtest"
	"github.com/entflake/entflake/schema"
)

func TestHostIdentity(t *testing.T) {
	t.Setenv("POD_NAME", "api-7d9f-x2")
	t.Setenv("HOSTNAME", "container-id")
	assert.Equal(t, "api-7d9f-x2", hostIdentity())
	t.Setenv("POD_NAME", "")
	assert.Equal(t, "container-id", hostIdentity())
	t.Setenv("HOSTNAME", "")
	h, _ := os.Hostname()
	assert.Equal(t, h, hostIdentity())
}

// tagTail is what follows the host in every tag: pid, start ms, 64 random
// bits.
var tagTail = regexp.MustCompile(`@[0-9]+@[0-9]{13}@[0-9a-f]{16}$`)

// TestInstanceTagUnique: tags made with the same service, host, pid and
// millisecond (two generators opened at once in one process) differ, and
// the tail that makes them differ survives the longest service and host.
func TestInstanceTagUnique(t *testing.T) {
	seen := map[string]bool{}
	for range 10_000 {
		tag, err := instanceTag("svc", "host", 1, 1_733_000_000_000)
		require.NoError(t, err)
		require.False(t, seen[tag], "tag %s made twice", tag)
		seen[tag] = true
		require.Regexp(t, tagTail, tag)
	}

	service := strings.Repeat("s", schema.ServiceNameSize)
	for _, host := range []string{"h", strings.Repeat("p", 40), strings.Repeat("é", 300)} {
		tag, err := instanceTag(service, host, 4_294_967_295, 9_999_999_999_999)
		require.NoError(t, err)
		assert.LessOrEqual(t, utf8.RuneCountInString(tag), schema.InstanceSize, "fits the column")
		assert.Regexp(t, tagTail, tag, "the pid, time and random part are never cut")
		assert.True(t, strings.HasPrefix(tag, instancePrefix(service, host)), "the takeover prefix matches the tag")
		assert.True(t, utf8.ValidString(tag))
	}
	// The shortened host does not depend on the pid or the time, so a
	// restarted pod's prefix matches its previous incarnation's tag.
	pod := strings.Repeat("statefulset-", 20) + "0"
	a, err := instanceTag(service, pod, 1, 1_000_000_000_000)
	require.NoError(t, err)
	b, err := instanceTag(service, pod, 1_234_567, 1_733_000_000_000)
	require.NoError(t, err)
	prefix := instancePrefix(service, pod)
	assert.True(t, strings.HasPrefix(a, prefix) && strings.HasPrefix(b, prefix))
	// Two long hosts that begin alike still get different tags' hosts.
	assert.NotEqual(t, shortHost(service, pod), shortHost(service, strings.Repeat("statefulset-", 20)+"1"))
}

// TestConcurrentOpensDistinctTags: generators opened at the same moment in
// one process hold distinct tags and distinct worker ids. Before the tags
// had a random part, pairs opened in the same millisecond shared one.
func TestConcurrentOpensDistinctTags(t *testing.T) {
	t.Setenv(EnvWorkerID, "")
	db := dbtest.SQLite(t)
	open(t, db.DB, "sqlite3", WithService("warm"), quiet()) // the tables exist
	const n = 16
	gens := make([]*Generator, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range n {
		wg.Go(func() {
			<-start
			gens[i] = open(t, db.DB, "sqlite3", WithService("twin"), WithHeartbeat(fastBeat), quiet())
		})
	}
	close(start)
	wg.Wait()
	tags, workers := map[string]bool{}, map[int64]bool{}
	for _, g := range gens {
		require.NotNil(t, g)
		assert.False(t, tags[g.Instance()], "tag %s held twice", g.Instance())
		assert.False(t, workers[g.WorkerID()], "worker id %d held twice", g.WorkerID())
		tags[g.Instance()], workers[g.WorkerID()] = true, true
	}
}
