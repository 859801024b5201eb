package ui

import (
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/manifold-run/manifold/bus"
	"github.com/manifold-run/manifold/internal/graph"
)

//go:embed assets
var assets embed.FS

// Config configures a Server.
type Config struct {
	// Bus is the attached bus the pages are read from. Required.
	Bus *bus.Bus
	// JaegerURL is the Jaeger UI's base URL (http://host:16686): a run's
	// page links to its trace there. Empty: no link, the trace ID alone.
	JaegerURL string
	// Logger logs failed requests. Defaults to slog.Default().
	Logger *slog.Logger
	// PollInterval is how often a running run's page asks for its state.
	// Defaults to 1s.
	PollInterval time.Duration
	// RequestTimeout bounds the bus reads of one request. Defaults to 15s.
	RequestTimeout time.Duration
}

// WithDefaults returns the config with every unset field defaulted.
func (c Config) WithDefaults() Config {
	c.Logger = cmp.Or(c.Logger, slog.Default())
	c.PollInterval = cmp.Or(c.PollInterval, time.Second)
	c.RequestTimeout = cmp.Or(c.RequestTimeout, 15*time.Second)
	c.JaegerURL = strings.TrimRight(c.JaegerURL, "/")
	return c
}

func (c Config) validate() error {
	if c.Bus == nil {
		return errors.New("ui: Config.Bus is required")
	}
	if c.PollInterval < 100*time.Millisecond {
		return fmt.Errorf("ui: PollInterval %s is below 100ms", c.PollInterval)
	}
	return nil
}

// Server serves the web view. It is an http.Handler.
type Server struct {
	cfg   Config
	mux   *http.ServeMux
	pages map[string]*template.Template
	plans graph.Plans
	svgs  svgCache
}

var _ http.Handler = (*Server)(nil)

// New returns a Server for cfg.
func New(cfg Config) (*Server, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, mux: http.NewServeMux(), pages: map[string]*template.Template{}}
	for _, page := range []string{"fleet", "runs", "run", "error"} {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(assets, "assets/layout.html", "assets/runtable.html", "assets/"+page+".html")
		if err != nil {
			return nil, fmt.Errorf("ui: template %s: %w", page, err)
		}
		s.pages[page] = t
	}
	static, _ := fs.Sub(assets, "assets/static")
	s.mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	s.mux.HandleFunc("GET /{$}", s.fleet)
	s.mux.HandleFunc("GET /runs", s.runs)
	s.mux.HandleFunc("GET /runs/{run}", s.run)
	s.mux.HandleFunc("GET /runs/{run}/live", s.live)
	return s, nil
}

// ServeHTTP serves GET and HEAD requests; anything else is refused with
// 405: the web view only reads.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		http.Error(w, "manifold ui is read-only: GET and HEAD only", http.StatusMethodNotAllowed)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// render writes a page; a template error after the first byte is logged.
func (s *Server) render(w http.ResponseWriter, r *http.Request, page, name string, status int, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	if err := s.pages[page].ExecuteTemplate(w, name, data); err != nil {
		s.cfg.Logger.Error("render page", "page", page, "path", r.URL.Path, "error", err)
	}
}

// fail renders the error page.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	if status >= 500 {
		s.cfg.Logger.Warn("request failed", "path", r.URL.Path, "status", status, "error", msg)
	}
	s.render(w, r, "error", "layout.html", status, errorPage{Title: http.StatusText(status), Status: status, Message: msg})
}

type errorPage struct {
	Title   string
	Status  int
	Message string
}

// reqCtx bounds the bus reads of a request.
func (s *Server) reqCtx(r *http.Request) (context.Context, context.CancelFunc) {
	return context.WithTimeout(r.Context(), s.cfg.RequestTimeout)
}
