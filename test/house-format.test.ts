/**
 * A house rule (docs/architecture.md): the whole tree is formatted (prettier --check). Its own file, apart
 * from test/house: prettier over the tree takes ~40 s on a quiet machine and over 2 minutes at load 20, and
 * together with the type check it pushed one file past tap's 240 s limit.
 */
import t from 'tap'
import { toolFailure } from './helpers/house-tool.js'

t.test('the tree is formatted (prettier --check)', async (t) => {
  t.equal(toolFailure('prettier', ['--check', '.']), '', 'prettier --check . passes')
})
