package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"gopkg.in/yaml.v3"
)

// cliConfig is the CLI's config file: where the server is and which token
// to use, so commands need no flags. `berth dev` writes it.
type cliConfig struct {
	Server string `yaml:"server"`
	Token  string `yaml:"token"`
}

// configPath is $BERTH_CONFIG, else $XDG_CONFIG_HOME/berth/config.yaml,
// else ~/.config/berth/config.yaml.
func configPath() string {
	if p := os.Getenv("BERTH_CONFIG"); p != "" {
		return p
	}
	if d := os.Getenv("XDG_CONFIG_HOME"); d != "" {
		return filepath.Join(d, "berth", "config.yaml")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".config", "berth", "config.yaml")
	}
	return ""
}

// loadConfig reads the config file; a missing file is an empty config.
func loadConfig() (cliConfig, error) {
	var c cliConfig
	p := configPath()
	if p == "" {
		return c, nil
	}
	b, err := os.ReadFile(p)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, err
	}
	if err := yaml.Unmarshal(b, &c); err != nil {
		return c, fmt.Errorf("%s: %w (expected `server:` and `token:`)", p, err)
	}
	return c, nil
}

// saveConfig writes the config file, readable by its owner only (it holds
// a token).
func saveConfig(c cliConfig) (string, error) {
	p := configPath()
	if p == "" {
		return "", errors.New("no home directory for the CLI config: set BERTH_CONFIG")
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return "", err
	}
	b, err := yaml.Marshal(c)
	if err != nil {
		return "", err
	}
	return p, os.WriteFile(p, b, 0o600)
}
