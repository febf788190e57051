// Rate windows are clock minutes: a test that counts requests against a per-minute limit
// starts its requests early enough in a minute that they all fall in the same window.

/** Waits for the next clock minute when less than `neededMs` of this one is left. */
export async function roomInThisMinute(neededMs: number): Promise<void> {
  const left = 60_000 - (Date.now() % 60_000);
  if (left < neededMs) await new Promise((resolve) => setTimeout(resolve, left + 100));
}
