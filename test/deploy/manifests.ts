/** Reading deploy/: the Kubernetes manifests (as listed by the kustomization) and the Dockerfile. */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { parseAllDocuments, parse as parseYaml } from "yaml";
import { ROOT } from "../store-http/processes.js";

export const DEPLOY = join(ROOT, "deploy");

export interface K8sObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; labels?: Record<string, string> };
  [key: string]: any;
}

export function loadManifests(): Array<{ file: string; object: K8sObject }> {
  const kustomization = parseYaml(readFileSync(join(DEPLOY, "k8s/kustomization.yaml"), "utf8"));
  const out: Array<{ file: string; object: K8sObject }> = [];
  for (const file of kustomization.resources as string[]) {
    for (const doc of parseAllDocuments(readFileSync(join(DEPLOY, "k8s", file), "utf8"))) {
      if (doc.errors.length > 0) throw new Error(`${file}: ${doc.errors[0]!.message}`);
      out.push({ file, object: doc.toJS() as K8sObject });
    }
  }
  return out;
}

export interface DockerInstruction {
  keyword: string;
  args: string;
  stage: number;
}

/** The Dockerfile's instructions (continuation lines joined), each with the index of its build stage. */
export function dockerInstructions(text: string): DockerInstruction[] {
  const joined = text.replace(/\\\r?\n/g, " ");
  const out: DockerInstruction[] = [];
  let stage = -1;
  for (const line of joined.split(/\r?\n/)) {
    const trimmed = line.trim();
    if (!trimmed || trimmed.startsWith("#")) continue;
    const [, keyword, args] = /^(\S+)\s*(.*)$/.exec(trimmed)!;
    if (keyword!.toUpperCase() === "FROM") stage++;
    out.push({ keyword: keyword!.toUpperCase(), args: args!.replace(/\s+/g, " "), stage });
  }
  return out;
}
