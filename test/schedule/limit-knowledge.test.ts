// What a rate controller keeps for a later run (src/schedule/limit-knowledge.ts): a rate counts as held only while it
// was used; with none held, a guess safely under the lowest rate that failed.
import { describe, expect, it } from 'vitest';
import { LimitKnowledge } from '../../src/schedule/limit-knowledge.ts';

describe('what a controller knows of the limit', () => {
  it('nothing before a 429 or a start: a rate under the server’s limit teaches nothing of it', () => {
    const knowledge = new LimitKnowledge();
    knowledge.held(5, 5);
    expect(knowledge.known).toBeUndefined();
  });

  it('a rate held while barely used (a key of a pool, sending at half its rate) is not known to hold: the guess stays under the failure', () => {
    const knowledge = new LimitKnowledge();
    knowledge.cut(12);
    knowledge.held(11.5, 5.5);
    expect(knowledge.known).toEqual({ rate: 12 * 0.75, above: 12, measured: true });
  });

  it('a rate held while used is known; a 429 at or under it forgets it', () => {
    const knowledge = new LimitKnowledge();
    knowledge.cut(12);
    knowledge.held(9.6, 9.5);
    expect(knowledge.known).toEqual({ rate: 9.6, above: 12, measured: true });
    knowledge.cut(10.4);
    expect(knowledge.known).toEqual({ rate: 9.6, above: 10.4, measured: true });
    knowledge.cut(9.5);
    expect(knowledge.known).toEqual({ rate: 9.5 * 0.75, above: 9.5, measured: true });
  });

  it('a start is known as given, not measured, until the run holds or fails a rate itself', () => {
    const knowledge = new LimitKnowledge();
    knowledge.started({ rate: 7.7, trusted: true }, 7.7 * 1.05);
    expect(knowledge.known).toEqual({ rate: 7.7, above: 7.7 * 1.05, measured: false });
    knowledge.held(7.8, 7.7);
    expect(knowledge.known).toEqual({ rate: 7.8, above: 7.7 * 1.05, measured: true });
  });

  it('with nothing held, never above the rate the controller ended at: the lowest failure is only a bound (a shared pacer leader cut to a fleet’s limit without a 429 at each step)', () => {
    const knowledge = new LimitKnowledge();
    knowledge.cut(8.26);
    expect(knowledge.knownAt(3.9)).toEqual({ rate: 3.9, above: 8.26, measured: true });
    // Ended over the guess (a probe): the guess stands.
    expect(knowledge.knownAt(9)).toEqual({ rate: 8.26 * 0.75, above: 8.26, measured: true });
    // What held while used is known, whatever the rate it ended at.
    knowledge.held(4, 4);
    expect(knowledge.knownAt(3)).toEqual({ rate: 4, above: 8.26, measured: true });
  });

  it('what a 429 and the requests accepted after it proved counts as held, used or not, under the lowest failure; forgotten when the limit fell', () => {
    const knowledge = new LimitKnowledge();
    knowledge.cut(8.3);
    // What held (less the burst it could hide) read 7.15 against nginx's 8 r/s; the proof, 7.99.
    knowledge.held(7.15, 7.1);
    knowledge.proven(7.99);
    expect(knowledge.knownAt(8.1)).toEqual({ rate: 7.99, above: 8.3, measured: true });
    knowledge.proven(9);
    expect(knowledge.known?.rate).toBe(8.3);
    knowledge.proven(undefined);
    expect(knowledge.known?.rate).toBe(7.15);
  });

  it('a proof under what held is what is known: what held is the rate the pacer was set to, the proof what the server accepted', () => {
    const knowledge = new LimitKnowledge();
    // Against nginx's 8 r/s, on a busy thread: a failed raise to 10.23 left 8.05 held (7.97 sent), and the 429s proved
    // 7.97. Before: the higher, 8.05, over the limit, and the next run paid a 429 and ran 10 % under.
    knowledge.cut(24);
    knowledge.held(8.05, 7.97);
    knowledge.cut(10.23);
    knowledge.proven(7.97);
    expect(knowledge.known).toEqual({ rate: 7.97, above: 10.23, measured: true });
    // Forgotten (a 429 under it: the limit fell), what held is known again.
    knowledge.proven(undefined);
    expect(knowledge.known?.rate).toBe(8.05);
  });
});
