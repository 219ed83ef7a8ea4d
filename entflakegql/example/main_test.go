package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/entflake/entflake"
	"github.com/entflake/entflake/internal/dbtest"
)

// The tests below run the example's real handler (gqlgen's handler.New
// with the POST and GET transports) on a loopback port, on a fresh
// database of each backend, and talk to it with a real HTTP client, as a
// browser would: JSON bodies in, JSON out, decoded with UseNumber so that a
// number stays a json.Number and can never pass for a string.

// api is a running example server and what a test needs to check its ids.
type api struct {
	t       *testing.T
	url     string // the GraphQL endpoint
	http    *http.Client
	backend *backend
	started time.Time
}

// migrating serializes the tests' migrations: ent's Schema.Create writes
// into the generated package's table descriptions (migrate.Tables), which
// every client of the process shares, so two at once race, even on two
// databases. A server migrates once; the tests, in parallel, many times.
var migrating sync.Mutex

// start serves the example on a fresh database of b.
func start(t *testing.T, b dbtest.Backend) *api {
	t.Helper()
	started := time.Now()
	db := b.Fresh(t)
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	migrating.Lock()
	be, err := openBackend(context.Background(), db.DB, b.Dialect, logger)
	migrating.Unlock()
	require.NoError(t, err)
	t.Cleanup(be.close) // after the server's Close below: cleanups run in reverse
	srv := httptest.NewServer(newHandler(be.client))
	t.Cleanup(srv.Close)
	return &api{t: t, url: srv.URL + "/query", http: &http.Client{Timeout: 30 * time.Second}, backend: be, started: started}
}

// response is a GraphQL response as a JavaScript client reads it.
type response struct {
	Data   map[string]any `json:"data"`
	Errors []gqlError     `json:"errors"`
}

// gqlError is one entry of a response's errors.
type gqlError struct {
	Message string `json:"message"`
	Path    []any  `json:"path"`
}

// query POSTs a query with its variables, checks that the answer is a
// GraphQL response (HTTP 200, JSON) whose every id is a JSON string, and
// returns it, errors and all.
func (a *api) query(query string, vars map[string]any) response {
	a.t.Helper()
	body, err := json.Marshal(map[string]any{"query": query, "variables": vars})
	require.NoError(a.t, err)
	req, err := http.NewRequest(http.MethodPost, a.url, bytes.NewReader(body))
	require.NoError(a.t, err)
	req.Header.Set("Content-Type", "application/json")
	return a.send(req)
}

// send does req and decodes its GraphQL response (see query).
func (a *api) send(req *http.Request) response {
	a.t.Helper()
	resp, err := a.http.Do(req)
	require.NoError(a.t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(a.t, err)
	// A panic in a resolver that gqlgen did not catch is a 500; an error
	// of a resolver is a 200 with errors.
	require.Equal(a.t, http.StatusOK, resp.StatusCode, "body: %s", raw)
	require.Contains(a.t, resp.Header.Get("Content-Type"), "application/json")
	var r response
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	require.NoError(a.t, dec.Decode(&r), "body: %s", raw)
	for _, e := range r.Errors {
		// gqlgen's message for a recovered panic.
		require.NotContains(a.t, e.Message, "internal system error", "body: %s", raw)
	}
	a.idsAreStrings(r.Data, "data")
	return r
}

// ok is query, for a query that must not fail.
func (a *api) ok(query string, vars map[string]any) map[string]any {
	a.t.Helper()
	r := a.query(query, vars)
	require.Empty(a.t, r.Errors, "query %s", query)
	return r.Data
}

// idsAreStrings fails the test for any id in v (a field named id or
// ending in ID, or the elements of one ending in IDs) that is not a JSON
// string.
func (a *api) idsAreStrings(v any, path string) {
	a.t.Helper()
	switch v := v.(type) {
	case map[string]any:
		for k, x := range v {
			p := path + "." + k
			switch {
			case x == nil:
			case k == "id" || strings.HasSuffix(k, "ID"):
				_, ok := x.(string)
				assert.True(a.t, ok, "%s is %T (%v), want a JSON string", p, x, x)
			case strings.HasSuffix(k, "IDs"):
				for i, y := range x.([]any) {
					_, ok := y.(string)
					assert.True(a.t, ok, "%s[%d] is %T (%v), want a JSON string", p, i, y, y)
				}
			default:
				a.idsAreStrings(x, p)
			}
		}
	case []any:
		for i, x := range v {
			a.idsAreStrings(x, fmt.Sprintf("%s[%d]", path, i))
		}
	}
}

// snowflake checks that v, an id from a response, is a JSON string holding
// a snowflake id of this server's generator, issued during the test, above
// 2^53 (where a JSON number would lose its low bits in JavaScript), and
// returns it.
func (a *api) snowflake(v any) string {
	a.t.Helper()
	s, ok := v.(string)
	require.True(a.t, ok, "id %v is %T, want a JSON string", v, v)
	id, err := strconv.ParseInt(s, 10, 64)
	require.NoError(a.t, err)
	require.Greater(a.t, id, int64(1)<<53, "id %s", s)
	p, err := entflake.Decode(id, entflake.DefaultLayout, entflake.DefaultEpoch)
	require.NoError(a.t, err)
	assert.Equal(a.t, a.backend.gen.WorkerID(), p.WorkerID, "id %s: worker id", s)
	assert.WithinRange(a.t, p.Time, a.started.Add(-time.Second), time.Now().Add(time.Second), "id %s: time", s)
	return s
}

// field walks a decoded response along keys (and list indexes).
func field(t *testing.T, v any, keys ...any) any {
	t.Helper()
	for _, k := range keys {
		switch k := k.(type) {
		case string:
			m, ok := v.(map[string]any)
			require.True(t, ok, "%v is no object (looking for %q)", v, k)
			v = m[k]
		case int:
			l, ok := v.([]any)
			require.True(t, ok, "%v is no list (looking for [%d])", v, k)
			require.Less(t, k, len(l))
			v = l[k]
		}
	}
	return v
}

// ids returns the id of each object of a list.
func ids(t *testing.T, list any) []string {
	t.Helper()
	l, _ := list.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		out = append(out, field(t, x, "id").(string))
	}
	return out
}

// sample is a small graph made through the API: two users, two tags, and
// two posts by the first user, one with both tags.
type sample struct {
	ann, bob     string // user ids
	red, blue    string // tag ids
	hello, again string // post ids
}

func (a *api) createUser(name string) string {
	a.t.Helper()
	d := a.ok(`mutation($name: String!) { createUser(input: {name: $name}) { id name posts { id } } }`,
		map[string]any{"name": name})
	assert.Equal(a.t, name, field(a.t, d, "createUser", "name"))
	return a.snowflake(field(a.t, d, "createUser", "id"))
}

func (a *api) createTag(name string) string {
	a.t.Helper()
	d := a.ok(`mutation($name: String!) { createTag(input: {name: $name}) { id name } }`, map[string]any{"name": name})
	return a.snowflake(field(a.t, d, "createTag", "id"))
}

// createPost creates a post and checks the edges it answers with.
func (a *api) createPost(title, author string, tags ...string) string {
	a.t.Helper()
	d := a.ok(`mutation($title: String!, $author: ID!, $tags: [ID!]) {
		createPost(input: {title: $title, authorID: $author, tagIDs: $tags}) {
			id title authorID author { id } tags { id }
		}
	}`, map[string]any{"title": title, "author": author, "tags": tags})
	p := field(a.t, d, "createPost")
	assert.Equal(a.t, title, field(a.t, p, "title"))
	assert.Equal(a.t, author, field(a.t, p, "authorID"))
	assert.Equal(a.t, author, field(a.t, p, "author", "id"))
	assert.ElementsMatch(a.t, tags, ids(a.t, field(a.t, p, "tags")))
	return a.snowflake(field(a.t, p, "id"))
}

func (a *api) sample() sample {
	a.t.Helper()
	var s sample
	s.ann, s.bob = a.createUser("ann"), a.createUser("bob")
	s.red, s.blue = a.createTag("red"), a.createTag("blue")
	s.hello = a.createPost("hello", s.ann, s.red, s.blue)
	s.again = a.createPost("again", s.ann)
	return s
}

// backends runs f on a fresh server per backend, in parallel.
func backends(t *testing.T, f func(t *testing.T, a *api)) {
	t.Parallel()
	dbtest.ForEach(t, func(t *testing.T, b dbtest.Backend) {
		t.Parallel()
		f(t, start(t, b))
	})
}

// TestCreate creates users, tags and posts with edges through the
// mutations, and reads the edges back from both ends through the
// connections: every id is a JSON string of a snowflake id (sample checks
// each as it is created).
func TestCreate(t *testing.T) {
	backends(t, func(t *testing.T, a *api) {
		s := a.sample()
		assert.Len(t, slices.Compact(slices.Sorted(slices.Values([]string{s.ann, s.bob, s.red, s.blue, s.hello, s.again}))), 6)

		d := a.ok(`{ users(first: 10) { totalCount edges { node { id name posts { id title authorID } } } } }`, nil)
		assert.EqualValues(t, "2", field(t, d, "users", "totalCount").(json.Number).String())
		ann := field(t, d, "users", "edges", 0, "node")
		assert.Equal(t, s.ann, field(t, ann, "id"))
		assert.ElementsMatch(t, []string{s.hello, s.again}, ids(t, field(t, ann, "posts")))
		for _, p := range field(t, ann, "posts").([]any) {
			assert.Equal(t, s.ann, field(t, p, "authorID"))
		}
		assert.Empty(t, field(t, d, "users", "edges", 1, "node", "posts"))

		d = a.ok(`{ tags(first: 10) { edges { node { id name posts { id author { id name } } } } } }`, nil)
		for i, want := range []string{s.red, s.blue} {
			tag := field(t, d, "tags", "edges", i, "node")
			assert.Equal(t, want, field(t, tag, "id"))
			assert.Equal(t, []string{s.hello}, ids(t, field(t, tag, "posts")))
			assert.Equal(t, s.ann, field(t, tag, "posts", 0, "author", "id"))
		}

		// A tag created with posts: the M2M edge from the other end.
		d = a.ok(`mutation($posts: [ID!]) { createTag(input: {name: "green", postIDs: $posts}) { id posts { id } } }`,
			map[string]any{"posts": []string{s.hello, s.again}})
		a.snowflake(field(t, d, "createTag", "id"))
		assert.ElementsMatch(t, []string{s.hello, s.again}, ids(t, field(t, d, "createTag", "posts")))
	})
}

// TestEdgeFieldID: the edge field author_id is Post.authorID in GraphQL,
// of type ID, and so a JSON string like the ids of the nodes.
func TestEdgeFieldID(t *testing.T) {
	backends(t, func(t *testing.T, a *api) {
		s := a.sample()
		d := a.ok(`{ posts(first: 10) { edges { node { id authorID author { id } } } } }`, nil)
		edges := field(t, d, "posts", "edges").([]any)
		require.Len(t, edges, 2)
		for _, e := range edges {
			author := field(t, e, "node", "authorID")
			assert.Equal(t, s.ann, a.snowflake(author))
			assert.Equal(t, author, field(t, e, "node", "author", "id"))
		}
	})
}

// TestReferenceFieldID: Post.reply_to_id, an int64 that holds another
// post's snowflake id without an edge, is marked entflakemixin.JSONString(),
// so entext gives it the GraphQL type ID (entgql alone makes it an Int): on
// the wire it is a JSON string, given as a string or a number.
func TestReferenceFieldID(t *testing.T) {
	backends(t, func(t *testing.T, a *api) {
		s := a.sample()
		for _, v := range []any{s.hello, json.Number(s.hello)} {
			r := a.query(`mutation($to: ID) { createPost(input: {title: "re", authorID: "`+s.bob+`", replyToID: $to}) { id replyToID } }`,
				map[string]any{"to": v})
			require.Empty(t, r.Errors, "replyToID: %T %v", v, v)
			reply := field(t, r.Data, "createPost", "replyToID")
			assert.IsType(t, "", reply, "replyToID: %T %v: a JSON string on the wire", v, v)
			assert.Equal(t, s.hello, a.snowflake(reply))
		}
		// Read back through the connection: the two replies name hello, the
		// others answer no post (null).
		d := a.ok(`{ posts(first: 10) { edges { node { title replyToID } } } }`, nil)
		replies := map[string][]any{}
		for _, e := range field(t, d, "posts", "edges").([]any) {
			title := field(t, e, "node", "title").(string)
			replies[title] = append(replies[title], field(t, e, "node", "replyToID"))
		}
		assert.Equal(t, map[string][]any{"re": {s.hello, s.hello}, "hello": {nil}, "again": {nil}}, replies)
	})
}

// nodeQuery asks for a node with every type's fields.
const nodeQuery = `query($id: ID!) {
	node(id: $id) {
		__typename id
		... on User { name posts { id } }
		... on Post { title authorID author { id } tags { id } }
		... on Tag { name posts { id } }
		... on Legacy { name }
	}
}`

// TestRoundTrip queries every id the mutations gave back by the string
// they gave it as.
func TestRoundTrip(t *testing.T) {
	backends(t, func(t *testing.T, a *api) {
		s := a.sample()
		for id, typename := range map[string]string{
			s.ann: "User", s.bob: "User", s.red: "Tag", s.blue: "Tag", s.hello: "Post", s.again: "Post",
		} {
			r := a.query(nodeQuery, map[string]any{"id": id})
			if assert.Empty(t, r.Errors, "node(id: %q)", id) {
				assert.Equal(t, id, field(t, r.Data, "node", "id"))
				assert.Equal(t, typename, field(t, r.Data, "node", "__typename"))
			}
		}
	})
}

// TestNode: node(id:) finds each type, with no hint from the client, and
// answers with its fields and edges.
func TestNode(t *testing.T) {
	backends(t, func(t *testing.T, a *api) {
		s := a.sample()
		legacy, err := a.backend.client.Legacy.Create().SetName("old").Save(context.Background())
		require.NoError(t, err)

		node := func(id string) map[string]any {
			t.Helper()
			r := a.query(nodeQuery, map[string]any{"id": id})
			if !assert.Empty(t, r.Errors, "node(id: %q)", id) {
				return nil
			}
			n, _ := field(t, r.Data, "node").(map[string]any)
			require.NotNil(t, n, "node(id: %q) is null", id)
			assert.Equal(t, id, n["id"])
			return n
		}
		if n := node(s.ann); n != nil {
			assert.Equal(t, "User", n["__typename"])
			assert.Equal(t, "ann", n["name"])
			assert.ElementsMatch(t, []string{s.hello, s.again}, ids(t, n["posts"]))
		}
		if n := node(s.hello); n != nil {
			assert.Equal(t, "Post", n["__typename"])
			assert.Equal(t, "hello", n["title"])
			assert.Equal(t, s.ann, n["authorID"])
			assert.Equal(t, s.ann, field(t, n, "author", "id"))
			assert.ElementsMatch(t, []string{s.red, s.blue}, ids(t, n["tags"]))
		}
		if n := node(s.red); n != nil {
			assert.Equal(t, "Tag", n["__typename"])
			assert.Equal(t, "red", n["name"])
			assert.Equal(t, []string{s.hello}, ids(t, n["posts"]))
		}
		if n := node(strconv.FormatInt(legacy.ID, 10)); n != nil {
			assert.Equal(t, "Legacy", n["__typename"])
			assert.Equal(t, "old", n["name"])
		}
	})
}

// TestNodes: nodes(ids:) answers in the order asked, across types and
// with an id twice.
func TestNodes(t *testing.T) {
	backends(t, func(t *testing.T, a *api) {
		s := a.sample()
		legacy, err := a.backend.client.Legacy.Create().SetName("old").Save(context.Background())
		require.NoError(t, err)
		old := strconv.FormatInt(legacy.ID, 10)

		order := []string{s.hello, s.bob, s.red, old, s.ann, s.again, s.blue, s.bob}
		types := []string{"Post", "User", "Tag", "Legacy", "User", "Post", "Tag", "User"}
		r := a.query(`query($ids: [ID!]!) { nodes(ids: $ids) { __typename id } }`, map[string]any{"ids": order})
		assert.Empty(t, r.Errors)
		nodes, _ := field(t, r.Data, "nodes").([]any)
		require.Len(t, nodes, len(order))
		for i, n := range nodes {
			if assert.NotNil(t, n, "nodes[%d] (%s %s)", i, types[i], order[i]) {
				assert.Equal(t, order[i], field(t, n, "id"), "nodes[%d]", i)
				assert.Equal(t, types[i], field(t, n, "__typename"), "nodes[%d]", i)
			}
		}
	})
}

// TestNodeUnknown: an id that no table holds is a null node, with an
// error that names the id, and never a panic or an HTTP 500 (send checks
// both).
func TestNodeUnknown(t *testing.T) {
	backends(t, func(t *testing.T, a *api) {
		s := a.sample()
		fresh, err := a.backend.gen.NextID() // issued, so valid, but never stored
		require.NoError(t, err)
		unknown := strconv.FormatInt(fresh, 10)
		for _, id := range []string{unknown, "1", "9223372036854775807"} {
			r := a.query(nodeQuery, map[string]any{"id": id})
			assert.Nil(t, field(t, r.Data, "node"), "node(id: %s)", id)
			for _, e := range r.Errors {
				t.Logf("node(id: %s): %s", id, e.Message)
				assert.Contains(t, e.Message, id, "node(id: %s): the error should name the id", id)
			}
		}

		// In nodes(ids:), the unknown id is a null in its place; the
		// others are found.
		r := a.query(`query($ids: [ID!]!) { nodes(ids: $ids) { id } }`, map[string]any{"ids": []string{s.ann, unknown, s.red}})
		nodes, _ := field(t, r.Data, "nodes").([]any)
		require.Len(t, nodes, 3)
		assert.Nil(t, nodes[1])
		for _, e := range r.Errors {
			assert.Equal(t, []any{"nodes", json.Number("1")}, e.Path, "error %q", e.Message)
			assert.Contains(t, e.Message, unknown)
		}
		if assert.NotNil(t, nodes[0]) && assert.NotNil(t, nodes[2]) {
			assert.Equal(t, s.ann, field(t, nodes[0], "id"))
			assert.Equal(t, s.red, field(t, nodes[2], "id"))
		}
	})
}

// TestNodeAmbiguous: an id that two tables hold (a legacy row given a
// user's id) is no node: the error names both candidates, rather than
// answering with either.
func TestNodeAmbiguous(t *testing.T) {
	backends(t, func(t *testing.T, a *api) {
		s := a.sample()
		user, err := strconv.ParseInt(s.bob, 10, 64)
		require.NoError(t, err)
		_, err = a.backend.client.Legacy.Create().SetID(user).SetName("copy of bob").Save(context.Background())
		require.NoError(t, err)

		check := func(r response, what string) {
			t.Helper()
			if !assert.NotEmpty(t, r.Errors, "%s: want an error", what) {
				return
			}
			t.Logf("%s: %s", what, r.Errors[0].Message)
			msg := strings.ToLower(r.Errors[0].Message)
			assert.True(t, strings.Contains(msg, "user"), "%s: %q should name User (users)", what, r.Errors[0].Message)
			assert.True(t, strings.Contains(msg, "legac"), "%s: %q should name Legacy (legacies)", what, r.Errors[0].Message)
		}
		r := a.query(nodeQuery, map[string]any{"id": s.bob})
		assert.Nil(t, field(t, r.Data, "node"))
		check(r, "node")

		r = a.query(`query($ids: [ID!]!) { nodes(ids: $ids) { id } }`, map[string]any{"ids": []string{s.ann, s.bob}})
		nodes, _ := field(t, r.Data, "nodes").([]any)
		require.Len(t, nodes, 2)
		assert.Nil(t, nodes[1])
		check(r, "nodes")
		if assert.NotNil(t, nodes[0], "nodes[0], the unambiguous id") {
			assert.Equal(t, s.ann, field(t, nodes[0], "id"))
		}
	})
}

// TestPagination walks a Relay connection of 25 users forwards
// (first/after) and backwards (last/before), 7 at a time: every user once,
// in id order, both ways.
func TestPagination(t *testing.T) {
	backends(t, func(t *testing.T, a *api) {
		var want []string
		for i := range 25 {
			want = append(want, a.createUser(fmt.Sprintf("user%02d", i)))
		}
		// The ids of one generator increase: the creation order is the id order.
		require.True(t, slices.IsSortedFunc(want, func(x, y string) int {
			i, _ := strconv.ParseInt(x, 10, 64)
			j, _ := strconv.ParseInt(y, 10, 64)
			return cmp.Compare(i, j)
		}))

		const page = `query($first: Int, $after: Cursor, $last: Int, $before: Cursor) {
			users(first: $first, after: $after, last: $last, before: $before) {
				totalCount
				pageInfo { hasNextPage hasPreviousPage startCursor endCursor }
				edges { cursor node { id name } }
			}
		}`
		// get fetches one page and returns its ids and page info.
		get := func(vars map[string]any) ([]string, map[string]any) {
			t.Helper()
			c := field(t, a.ok(page, vars), "users")
			assert.Equal(t, json.Number("25"), field(t, c, "totalCount"))
			var got []string
			for _, e := range field(t, c, "edges").([]any) {
				got = append(got, field(t, e, "node", "id").(string))
				assert.NotEmpty(t, field(t, e, "cursor"))
			}
			return got, field(t, c, "pageInfo").(map[string]any)
		}

		var forward []string
		vars := map[string]any{"first": 7}
		for pages := 0; ; pages++ {
			require.Less(t, pages, 5, "forward: no end after %d pages", pages)
			got, info := get(vars)
			assert.LessOrEqual(t, len(got), 7)
			forward = append(forward, got...)
			if info["hasNextPage"] != true {
				break
			}
			vars = map[string]any{"first": 7, "after": info["endCursor"]}
		}
		assert.Equal(t, want, forward, "forward")

		var backward []string
		vars = map[string]any{"last": 7}
		for pages := 0; ; pages++ {
			require.Less(t, pages, 5, "backward: no start after %d pages", pages)
			got, info := get(vars)
			assert.LessOrEqual(t, len(got), 7)
			backward = append(got, backward...)
			if info["hasPreviousPage"] != true {
				break
			}
			vars = map[string]any{"last": 7, "before": info["startCursor"]}
		}
		assert.Equal(t, want, backward, "backward")
	})
}

// TestIDVariable: a variable of type ID! may be a JSON string or a JSON
// number; both are the same id, with all 64 bits (gqlgen decodes the
// request with UseNumber, and entflakegql.UnmarshalID reads the json.Number
// without a float64). Answers are strings either way.
func TestIDVariable(t *testing.T) {
	backends(t, func(t *testing.T, a *api) {
		s := a.sample()

		t.Run("input", func(t *testing.T) {
			// An edge id in a mutation's input, as a number.
			d := a.ok(`mutation($author: ID!) { createPost(input: {title: "by number", authorID: $author}) { authorID } }`,
				map[string]any{"author": json.Number(s.bob)})
			assert.Equal(t, s.bob, field(t, d, "createPost", "authorID"))
		})

		t.Run("node", func(t *testing.T) {
			for _, v := range []any{s.bob, json.Number(s.bob)} {
				r := a.query(`query($id: ID!) { node(id: $id) { __typename id ... on User { name } } }`, map[string]any{"id": v})
				if assert.Empty(t, r.Errors, "node(id: %T %v)", v, v) {
					assert.Equal(t, s.bob, field(t, r.Data, "node", "id"), "node(id: %T %v)", v, v)
					assert.Equal(t, "bob", field(t, r.Data, "node", "name"), "node(id: %T %v)", v, v)
				}
			}
		})

		t.Run("refused", func(t *testing.T) {
			// What UnmarshalID refuses is a GraphQL error, not a guess.
			for _, v := range []any{json.Number("1.5"), json.Number("3.8e17"), "0", "-1", "x"} {
				r := a.query(`query($id: ID!) { node(id: $id) { id } }`, map[string]any{"id": v})
				assert.NotEmpty(t, r.Errors, "node(id: %T %v)", v, v)
				assert.Nil(t, r.Data["node"], "node(id: %T %v)", v, v)
			}
		})
	})
}

// TestRun runs the command's own path, SQLite in memory (the default),
// serving on a loopback port, over POST and GET, until its context ends.
//
// Not parallel: run migrates outside the migrating mutex, and ent's
// Schema.Create writes the package's shared migrate.Tables. The parallel
// tests wait until the sequential ones are done.
func TestRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, slog.New(slog.NewTextHandler(io.Discard, nil)), "sqlite", "", "127.0.0.1:0", pw)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	require.NoError(t, err)
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	i := strings.Index(line, "http://")
	require.GreaterOrEqual(t, i, 0, "output %q", line)
	endpoint := strings.TrimSpace(line[i:])

	a := &api{t: t, url: endpoint, http: &http.Client{Timeout: 30 * time.Second}}
	d := a.ok(`mutation { createUser(input: {name: "ann"}) { id } }`, nil)
	ann := field(t, d, "createUser", "id").(string)
	id, err := strconv.ParseInt(ann, 10, 64)
	require.NoError(t, err)
	assert.Greater(t, id, int64(1)<<53)

	req, err := http.NewRequest(http.MethodGet, endpoint+"?query="+url.QueryEscape(`{ users(first: 1) { edges { node { id name } } } }`), nil)
	require.NoError(t, err)
	d = a.send(req).Data
	assert.Equal(t, ann, field(t, d, "users", "edges", 0, "node", "id"))

	cancel()
	select {
	case err := <-done:
		assert.NoError(t, err)
	case <-time.After(30 * time.Second):
		t.Fatal("run did not return after its context ended")
	}
}
