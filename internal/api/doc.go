// Package api is berth's HTTP wire format under /v1: request and response
// types, their validation (every error names its field and what was
// expected), the error shape, strict decoding, and the OpenAPI 3 document
// served at /v1/openapi.json.
//
// It converts requests into model objects and nothing else: no I/O, no
// scheduling, no table. The server and the typed client share it.
package api
