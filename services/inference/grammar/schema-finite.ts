/**
 * Which subschemas have a finite instance. A schema such as
 * `{"type": "object", "properties": {"c": {"$ref": "#"}}, "required": ["c"]}` has none: every
 * value must contain another one. Its grammar has a rule that never ends, and XGrammar's
 * converter aborts on it (WASM `Aborted()`, its memory kept), so such a schema is found here,
 * before anything is compiled. Computed as a least fixpoint: a node is finite once some choice
 * of its branches is finite with what is already known to be finite.
 */

type Node = Record<string, unknown>;

const PRIMITIVES = new Set(["string", "number", "integer", "boolean", "null"]);

/**
 * The path of the first subschema of `root` (or one a `$ref` leads to) that has no finite instance, or
 * undefined when every one has. `resolve` finds a `$ref`'s target (already checked to exist).
 */
export function firstInfinite(root: unknown, where: string, resolve: (ref: string) => unknown): string | undefined {
  const paths = new Map<Node, string>();
  const collect = (node: unknown, path: string, refs: boolean): void => {
    if (!isNode(node) || (paths.has(node) && !refs)) return;
    if (!paths.has(node)) paths.set(node, path);
    for (const [child, at] of children(node, path)) collect(child, at, refs);
    if (refs && typeof node.$ref === "string") {
      const target = resolve(node.$ref);
      if (isNode(target) && !paths.has(target)) collect(target, `${path}.$ref`, false);
    }
  };
  // Paths by the schema's structure first; then what only a `$ref` reaches.
  collect(root, where, false);
  collect(root, where, true);

  const finite = new Set<Node>();
  const holds = (sub: unknown): boolean => !isNode(sub) || finite.has(sub);
  const hasFiniteValue = (node: Node): boolean => {
    if (typeof node.$ref === "string" && !holds(resolve(node.$ref))) return false;
    if (Array.isArray(node.anyOf) && !node.anyOf.some(holds)) return false;
    if ("enum" in node || "const" in node) return true;
    const types = Array.isArray(node.type) ? node.type : node.type === undefined ? inferredTypes(node) : [node.type];
    return types.some((t) => {
      if (typeof t === "string" && PRIMITIVES.has(t)) return true;
      if (t === "object") return requiredOf(node).every((name) => holds(propertyOf(node, name)));
      if (t === "array") return arrayFinite(node, holds);
      return t === "any";
    });
  };
  for (let changed = true; changed; ) {
    changed = false;
    for (const node of paths.keys()) {
      if (!finite.has(node) && hasFiniteValue(node)) {
        finite.add(node);
        changed = true;
      }
    }
  }
  for (const [node, path] of paths) if (!finite.has(node)) return path;
  return undefined;
}

/** A node without `type`: the kinds its keywords describe, or any value. */
function inferredTypes(node: Node): string[] {
  if ("properties" in node || "required" in node || "additionalProperties" in node) return ["object"];
  if ("items" in node || "prefixItems" in node || "minItems" in node) return ["array"];
  if ("$ref" in node || "anyOf" in node) return ["any"];
  return ["null"];
}

function requiredOf(node: Node): string[] {
  return Array.isArray(node.required) ? (node.required as string[]) : [];
}

function propertyOf(node: Node, name: string): unknown {
  const props = isNode(node.properties) ? node.properties : {};
  if (Object.hasOwn(props, name)) return props[name];
  return isNode(node.additionalProperties) ? node.additionalProperties : undefined;
}

function arrayFinite(node: Node, holds: (sub: unknown) => boolean): boolean {
  const min = typeof node.minItems === "number" ? node.minItems : 0;
  const prefix = Array.isArray(node.prefixItems) ? node.prefixItems : [];
  if (!prefix.slice(0, min).every(holds)) return false;
  return min <= prefix.length || holds(node.items);
}

/** The subschemas of a node, with their paths. */
function* children(node: Node, path: string): Generator<[unknown, string]> {
  for (const key of ["properties", "$defs", "definitions"]) {
    const map = node[key];
    if (isNode(map)) for (const [name, sub] of Object.entries(map)) yield [sub, `${path}.${key}.${name}`];
  }
  for (const key of ["additionalProperties", "items"]) if (isNode(node[key])) yield [node[key], `${path}.${key}`];
  for (const key of ["anyOf", "prefixItems"]) {
    const list = node[key];
    if (Array.isArray(list)) for (const [i, sub] of list.entries()) yield [sub, `${path}.${key}[${i}]`];
  }
}

function isNode(v: unknown): v is Node {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}
