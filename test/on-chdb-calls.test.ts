// The call and OpenTelemetry suites again, on the ClickHouse backend in-process (chdb): the same assertions on both
// backends (statistics and usage are in test/on-chdb-stats: together the four took 267 s at load 27, past tap's
// 240 s limit). The suites' servers inherit WEFT_STORAGE; set before the suites (and their helpers) load, hence the
// dynamic imports. Without chdb installed (an optional dependency) the helper skips the file.
process.env.WEFT_STORAGE = 'chdb'
await import('./calls.test.js')
await import('./otel.test.js')
