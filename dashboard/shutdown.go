package dashboard

import (
	"net/http"
	"sync"
)

// An event stream is a response that never ends by itself, and http.Server.Shutdown waits for
// every response to end: left alone, one open tab would hold a graceful shutdown for its whole
// deadline. So the first stream a server carries registers, with Server.RegisterOnShutdown, a
// function that ends every stream of that server when its shutdown begins. The server is the
// one http.ServerContextKey names in the request's context; a request without one (a recorder,
// another server's implementation) has its stream end only with the request or Close.
//
// Shutdown runs its functions once, as it begins; a stream that registers after that, in the
// instant between a shutdown's start and its closing of idle connections, is not told. The
// entries are kept for the Handler's life, one per server that ever carried a stream: a
// server's shutdown cannot be undone, and an application has a server or two.

// shutdowns are the servers the Handler's streams came through, each with a channel closed when
// its shutdown begins.
type shutdowns struct {
	mu   sync.Mutex
	done map[*http.Server]chan struct{}
}

// of returns the channel closed when the shutdown of r's server begins, registering with that
// server the first time; nil (never ready) when r names no server.
func (s *shutdowns) of(r *http.Request) <-chan struct{} {
	srv, _ := r.Context().Value(http.ServerContextKey).(*http.Server)
	if srv == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch, ok := s.done[srv]; ok {
		return ch
	}
	if s.done == nil {
		s.done = map[*http.Server]chan struct{}{}
	}
	ch := make(chan struct{})
	s.done[srv] = ch
	srv.RegisterOnShutdown(func() { close(ch) })
	return ch
}
