// The refresh planner on a month of the simulator's days, by their ground truth (test/bench/refresh-world.ts,
// refresh-policies.ts: the benchmark's replay, docs/benchmarks.md#spending-where-answers-change), held to issue 42's
// first aim on two seeds so that a change to the planner that loses it fails here, not only in a benchmark's figures.
// Not timed: the replay is a pure function of the seed.
import { describe, expect, it } from 'vitest';
import { buildWorld, fullDay } from '../bench/refresh-world.ts';
import { planner, replay, roundRobin } from '../bench/refresh-policies.ts';

describe('the refresh planner over a month of the simulator’s days (300 keywords, one tracked domain each)', () => {
  for (const seed of [1, 2]) {
    const world = buildWorld(seed, 300, 30);
    const day = fullDay(world);

    it(`seed ${seed}: at 40 % of a full day's credits a run, catches ≥ 90 % of the moves, within the budget, no series skipped more than 7 runs`, () => {
      const budget = Math.floor(day * 0.4);
      const month = replay(world, budget, planner());
      expect(month.moves).toBeGreaterThan(100);
      expect(month.caught / month.moves).toBeGreaterThanOrEqual(0.9);
      expect(month.credits).toBeLessThanOrEqual(budget * world.days);
      expect(month.maxSkipped).toBeLessThanOrEqual(7);
    });

    it(`seed ${seed}: at 10 % a run, catches ≥ 1.5 × the moves round-robin (depth until found) catches at the same credits`, () => {
      const budget = Math.floor(day * 0.1);
      const [planned, cycled] = [replay(world, budget, planner()), replay(world, budget, roundRobin)];
      expect(planned.credits).toBeLessThanOrEqual(budget * world.days);
      expect(planned.caught).toBeGreaterThanOrEqual(1.5 * cycled.caught);
    });
  }
});
