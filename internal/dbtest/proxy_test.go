package dbtest

import (
	"bufio"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

// echoServer answers every line it reads with the line, and records the
// lines it got, so that a test can tell a request that ran from one that
// never arrived.
type echoServer struct {
	ln  net.Listener
	mu  sync.Mutex
	got []string
}

func newEchoServer(t *testing.T) *echoServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	s := &echoServer{ln: ln}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				r := bufio.NewReader(c)
				for {
					line, err := r.ReadString('\n')
					if err != nil {
						return
					}
					s.mu.Lock()
					s.got = append(s.got, strings.TrimSpace(line))
					s.mu.Unlock()
					if _, err := io.WriteString(c, line); err != nil {
						return
					}
				}
			}()
		}
	}()
	return s
}

func (s *echoServer) received() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.got...)
}

// ask sends a line and waits up to a second for its answer; ok is false
// when the connection broke or nothing came.
func ask(t *testing.T, c net.Conn, r *bufio.Reader, line string) (answer string, ok bool) {
	t.Helper()
	if _, err := io.WriteString(c, line+"\n"); err != nil {
		return "", false
	}
	_ = c.SetReadDeadline(time.Now().Add(time.Second))
	a, err := r.ReadString('\n')
	if err != nil {
		return "", false
	}
	return strings.TrimSpace(a), true
}

// TestProxyLosesAnswers: LoseAnswerTo relays the matching request, which
// the server runs, loses the answer and closes that connection, while other
// requests pass; LoseAnswers does so for every request. Lost counts both.
func TestProxyLosesAnswers(t *testing.T) {
	s := newEchoServer(t)
	p := NewProxy(t, s.ln.Addr().String())
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", p.Addr())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c, bufio.NewReader(c)
	}
	c, r := dial()
	if a, ok := ask(t, c, r, "hello"); !ok || a != "hello" {
		t.Fatalf("pass: got %q, %v", a, ok)
	}
	p.LoseAnswerTo("CLAIM", 1)
	if a, ok := ask(t, c, r, "read slot"); !ok || a != "read slot" {
		t.Fatalf("a request that does not match: got %q, %v", a, ok)
	}
	if _, ok := ask(t, c, r, "CLAIM slot 7"); ok {
		t.Fatal("the answer to the armed request reached the client")
	}
	if p.Lost() != 1 || p.Armed() != 0 {
		t.Fatalf("lost %d, armed %d; want 1, 0", p.Lost(), p.Armed())
	}
	c2, r2 := dial()
	if a, ok := ask(t, c2, r2, "CLAIM again"); !ok || a != "CLAIM again" {
		t.Fatalf("after the one armed request: got %q, %v", a, ok)
	}
	p.LoseAnswers()
	if _, ok := ask(t, c2, r2, "renew"); ok {
		t.Fatal("LoseAnswers let an answer through")
	}
	p.Pass()
	c3, r3 := dial()
	if a, ok := ask(t, c3, r3, "back"); !ok || a != "back" {
		t.Fatalf("after Pass: got %q, %v", a, ok)
	}
	if p.Lost() != 2 {
		t.Fatalf("lost %d, want 2", p.Lost())
	}
	deadline := time.Now().Add(time.Second)
	for len(s.received()) < 6 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	want := []string{"hello", "read slot", "CLAIM slot 7", "CLAIM again", "renew", "back"}
	if got := s.received(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Fatalf("the server ran %q, want %q (a lost answer's request runs)", got, want)
	}
}

// TestProxyPatternAcrossReads: a pattern split between two writes of the
// client is still found.
func TestProxyPatternAcrossReads(t *testing.T) {
	s := newEchoServer(t)
	p := NewProxy(t, s.ln.Addr().String())
	c, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	p.LoseAnswerTo("INSERT INTO", 1)
	if _, err := io.WriteString(c, "INSERT I"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(50 * time.Millisecond) // a read of its own at the proxy
	if _, ok := ask(t, c, bufio.NewReader(c), "NTO slot"); ok {
		t.Fatal("the answer reached the client")
	}
	if p.Lost() != 1 {
		t.Fatalf("lost %d, want 1", p.Lost())
	}
}
