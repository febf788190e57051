/** `text` cut at the given points (each taken modulo its length + 1, duplicates dropped): a stream's chunks for property tests. */
export function splitAt(text: string, cuts: number[]): string[] {
  const points = [...new Set(cuts.map((c) => c % (text.length + 1)))].sort((a, b) => a - b);
  const chunks: string[] = [];
  let from = 0;
  for (const point of points) {
    chunks.push(text.slice(from, point));
    from = point;
  }
  chunks.push(text.slice(from));
  return chunks;
}
