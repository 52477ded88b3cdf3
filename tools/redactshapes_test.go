package tools_test

import (
	"testing"

	"relaybot/tools"
)

// TestRedactionCoversURLPasswordsSignaturesAndSecretKeys lists every shape of secret an audit row
// used to keep verbatim: URL passwords of any scheme, signed-URL signatures and credentials, and
// the values of JSON keys that name secrets, at any depth, in valid and malformed JSON and in
// plain text. Token counts stay readable.
func TestRedactionCoversURLPasswordsSignaturesAndSecretKeys(t *testing.T) {
	const s3 = "https://b.s3.amazonaws.com/k.pdf?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAEXAMPLE%2F20261201%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20261201T000000Z&X-Amz-Expires=900&X-Amz-SignedHeaders=host&X-Amz-Signature=0f1e2d3c4b5a"
	const s3Redacted = "https://b.s3.amazonaws.com/k.pdf?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=[redacted]&X-Amz-Date=20261201T000000Z&X-Amz-Expires=900&X-Amz-SignedHeaders=host&X-Amz-Signature=[redacted]"
	tests := []struct {
		name, in, want string
	}{
		// URL passwords, any scheme.
		{"dsn key in JSON", `{"dsn":"postgres://admin:hunter2@10.0.0.5/prod"}`, `{"dsn":"[redacted]"}`},
		{"URL password in a JSON string", `{"url":"postgres://admin:hunter2@10.0.0.5/prod"}`, `{"url":"postgres://admin:[redacted]@10.0.0.5/prod"}`},
		{"URL password in plain text", "connect to postgres://admin:hunter2@10.0.0.5:5432/prod: refused", "connect to postgres://admin:[redacted]@10.0.0.5:5432/prod: refused"},
		{"mysql URL", "dial mysql://root:toor@db:3306/app", "dial mysql://root:[redacted]@db:3306/app"},
		{"redis URL without user", "redis://:s3cret@cache:6379/0 down", "redis://:[redacted]@cache:6379/0 down"},
		{"https URL with basic auth", "GET https://bob:pa55w0rd@example.com/x", "GET https://bob:[redacted]@example.com/x"},
		{"amqp URL in a JSON array", `["amqp+ssl://guest:guest@mq/vhost"]`, `["amqp+ssl://guest:[redacted]@mq/vhost"]`},
		{"URL password in malformed JSON", `{"q": "postgres://admin:hunter2@h/db", "n"`, `{"q": "postgres://admin:[redacted]@h/db", "n"`},
		{"URL with a user and no password stays", "https://bob@example.com/x", "https://bob@example.com/x"},
		{"e-mail address stays", "mail bob@example.com at 10:30", "mail bob@example.com at 10:30"},
		{"host and port stay", "http://example.com:8080/a@b", "http://example.com:8080/a@b"},

		// Signed URLs.
		{"S3 presigned URL", s3, s3Redacted},
		{"S3 presigned URL in JSON", `{"link":"` + s3 + `"}`, `{"link":"` + s3Redacted + `"}`},
		{"S3 security token", "https://b/k?X-Amz-Security-Token=FQoGZX&X-Amz-Date=1", "https://b/k?X-Amz-Security-Token=[redacted]&X-Amz-Date=1"},
		{"GCS signed URL", "https://storage.googleapis.com/b/o?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Credential=svc%40p.iam&X-Goog-Signature=ab12cd",
			"https://storage.googleapis.com/b/o?X-Goog-Algorithm=GOOG4-RSA-SHA256&X-Goog-Credential=[redacted]&X-Goog-Signature=[redacted]"},
		{"Azure SAS sig", "https://a.blob.core.windows.net/c/b?sv=2022-11-02&se=2026-12-01&sig=Zm9vYmFy%3D", "https://a.blob.core.windows.net/c/b?sv=2022-11-02&se=2026-12-01&sig=[redacted]"},
		{"signature parameter", "https://cdn.example/f?expires=1&signature=abcdef", "https://cdn.example/f?expires=1&signature=[redacted]"},
		{"CloudFront Signature and Key-Pair-Id", "https://d.cloudfront.net/v?Expires=1&Signature=abc~def&Key-Pair-Id=K2", "https://d.cloudfront.net/v?Expires=1&Signature=[redacted]&Key-Pair-Id=K2"},

		// JSON keys naming secrets, at any depth.
		{"secret keys at any depth", `{"a":{"b":[{"password":"p","secret":"s","token":"t","api_key":"k","authorization":"Bearer x","dsn":"d"}]}}`,
			`{"a":{"b":[{"api_key":"[redacted]","authorization":"[redacted]","dsn":"[redacted]","password":"[redacted]","secret":"[redacted]","token":"[redacted]"}]}}`},
		{"more secret key spellings", `{"client_secret":1,"connection_string":"x","passphrase":"y","X-Amz-Signature":"z","DATABASE_DSN":"w"}`,
			`{"DATABASE_DSN":"[redacted]","X-Amz-Signature":"[redacted]","client_secret":"[redacted]","connection_string":"[redacted]","passphrase":"[redacted]"}`},
		{"token counts stay", `{"max_tokens":512,"usage":{"prompt_tokens":10,"total_tokens":20},"keyword":"k"}`,
			`{"keyword":"k","max_tokens":512,"usage":{"prompt_tokens":10,"total_tokens":20}}`},
		{"malformed JSON with a dsn key", `{"dsn": "postgres://a:b@h/db", "q"`, `{"dsn": "[redacted]", "q"`},
		{"plain dsn pair", "using dsn=postgres://u:p@h/db now", "using dsn=[redacted] now"},
		{"plain passphrase pair", "passphrase: correct-horse", "passphrase: [redacted]"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tools.RedactJSONText(tc.in); got != tc.want {
				t.Fatalf("stored in the audit row:\n%s\nwant\n%s", got, tc.want)
			}
		})
	}
}
