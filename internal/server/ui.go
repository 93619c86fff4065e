package server

import (
	"embed"
	"io/fs"
	"net/http"
)

// ui holds the fleet page: plain HTML, CSS and JavaScript with no build
// step, embedded so the server binary is the whole deployment.
//
//go:embed ui
var ui embed.FS

func (s *Server) uiHandler() http.Handler {
	sub, _ := fs.Sub(ui, "ui")
	return http.StripPrefix("/ui/", http.FileServer(http.FS(sub)))
}

func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	b, _ := ui.ReadFile("ui/index.html")
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	w.Write(b)
}
