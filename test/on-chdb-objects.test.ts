// The object, table, ref and feedback suites again, on the ClickHouse backend in-process (chdb): the same assertions
// on both backends. The suites' servers inherit WEFT_STORAGE; set before the suites (and their helpers) load, hence
// the dynamic imports. Without chdb installed (an optional dependency) the helper skips the file.
process.env.WEFT_STORAGE = 'chdb'
await import('./objects.test.js')
await import('./objects-query.test.js')
await import('./tables.test.js')
await import('./refs.test.js')
await import('./feedback.test.js')
