export { startSimulator, type Simulator, type Gate, type SimulatorStats, type LogEntry, type RankedResult, type SeriesOf } from './server.ts';
export { type SimulatorOptions, type SimulatedKey, type FaultRule, DEFAULT_WEIGHTS } from './options.ts';
