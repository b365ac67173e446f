// Grammar lane: an xgrammar instance that compiles grammars and computes token masks for one model's engine.
import { parentPort, workerData } from 'node:worker_threads'
import { serveLane } from '../src/inference/structured/lane.js'
import type { LaneConfig } from '../src/inference/structured/lane-protocol.js'

serveLane(workerData as LaneConfig, parentPort!)
