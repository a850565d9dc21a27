/**
 * The last day the simulator lives to (about ten years of daily runs): a bound on the work one answer can cost. A
 * module of its own so that the command line checks a `--simulator` day without loading the simulator (a run that
 * starts none does not carry its code).
 */
export const LAST_DAY = 3650;
