// What a run's slots carry for its shared meter: the types both sides (shared-pacer.ts, shared-meter.ts) agree on.

/** What one slot's statement carries for the meter: settled reservations ($6–$8 of `acquireCarrying`) and credits to reserve ahead ($9). */
export interface Carried {
  held: number;
  spent: number;
  uncertain: number;
  prepay: number;
}

/** Nothing for a slot to carry (the slot's plain statement is sent): no settle, no reservation ahead. */
export const isEmpty = (carried: Carried): boolean => carried.held === 0 && carried.spent === 0 && carried.prepay === 0;

/** The run's figures as a carrying slot's statement answers them, with whether the worker is alive and the reservation ahead taken. */
export interface CarriedRow {
  budget: number | null;
  spent: number;
  uncertain: number;
  reserved: number;
  alive: boolean;
  took: boolean;
}

/**
 * The meter's side of the run's slots (docs/distributed.md#sizing-a-fleet-and-its-database): a slot's statement takes
 * what the meter would otherwise send in statements of its own (`take`), and hands back what the database answered
 * (`landed`) or how it failed (`failed`).
 */
export interface SlotCarrier {
  take(): Carried;
  landed(carried: Carried, row: CarriedRow | undefined): void;
  failed(carried: Carried, error: unknown): void;
}

/**
 * How long settled reservations wait for a slot's statement to carry them before they are written alone: a worker at
 * work takes its next slot within milliseconds of an answer; an idle one writes them after this.
 */
export const CARRY_WAIT_MS = 250;
