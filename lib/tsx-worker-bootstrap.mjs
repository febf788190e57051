// Entry point of a worker thread started from TypeScript sources (under tsx or vitest):
// Node 20 does not apply a worker's `--import tsx` hooks to its entry point, so this registers
// tsx's ESM hooks (argv[2]: the URL of `tsx/esm/api`) and then imports the source (argv[3]).
// A file rather than `eval: true`, whose `node -e` globals (`module`, `exports`) mislead UMD bundles.
const [tsxApi, entry] = process.argv.slice(2);
const tsx = await import(tsxApi);
tsx.register();
await import(entry);
