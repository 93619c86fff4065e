package api

import _ "embed"

// OpenAPI is the OpenAPI 3 document served at /v1/openapi.json.
//
//go:embed openapi.json
var OpenAPI []byte
