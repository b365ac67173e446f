// The query-language and expand_columns suites again, on the ClickHouse backend in-process (chdb): the same cases
// (feedback fields and expanded refs in call filters and sorts) answer the same on both backends. Arrow answers on
// ClickHouse are compared with the embedded store's in test/clickhouse-call-expand.test.ts (run
// `WEFT_STORAGE=chdb npx tap test/arrow-answers.test.ts` for the whole Arrow suite on chdb; left out here for the
// suite's time). The suites' servers inherit WEFT_STORAGE; set before the suites (and their helpers) load, hence the
// dynamic imports. Without chdb installed the helper skips the file.
process.env.WEFT_STORAGE = 'chdb'
await import('./query-language.test.js')
await import('./calls-expand.test.js')
