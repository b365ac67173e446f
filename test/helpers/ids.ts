import { randomBytes } from 'node:crypto'

/** `n` random lowercase hex digits (Weave call ids are 16, trace ids 32). */
export const hex = (n: number): string => randomBytes(n / 2).toString('hex')
