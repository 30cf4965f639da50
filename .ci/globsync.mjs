// Node 20 lacks fs.globSync (added in Node 22). This --import module registers a loader hook
// that serves "fs" with a globSync added, for the one pattern the conformance suite uses
// (**/<name>).
import { register } from "node:module";

const hooks = `
const SHIM = "toolcards-shim:fs";
export async function resolve(specifier, context, next) {
  if ((specifier === "fs" || specifier === "node:fs") && context.parentURL !== SHIM) {
    return { url: SHIM, shortCircuit: true };
  }
  return next(specifier, context);
}
export async function load(url, context, next) {
  if (url !== SHIM) return next(url, context);
  const source = \`
import fs from "node:fs";
import path from "node:path";
export * from "node:fs";
function walk(dir, name, root, found) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) walk(full, name, root, found);
    else if (entry.name === name) found.push(path.relative(root, full));
  }
  return found;
}
export function globSync(pattern, options = {}) {
  if (typeof fs.globSync === "function") return fs.globSync(pattern, options);
  const root = options.cwd ? String(options.cwd) : process.cwd();
  return walk(root, path.basename(String(pattern)), root, []);
}
if (typeof fs.globSync !== "function") fs.globSync = globSync;
export default fs;
\`;
  return { format: "module", source, shortCircuit: true };
}
`;
register("data:text/javascript," + encodeURIComponent(hooks), import.meta.url);
