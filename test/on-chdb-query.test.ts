// The query-language suite again, on the ClickHouse backend in-process (chdb): the same cases, feedback fields in call
// filters and sorts included, answer the same on both backends. The suite's servers inherit WEFT_STORAGE; set before
// the suite (and its helpers) load, hence the dynamic import. Without chdb installed the helper skips the file.
process.env.WEFT_STORAGE = 'chdb'
await import('./query-language.test.js')
