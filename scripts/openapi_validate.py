"""Validates JSON bodies against OpenAI's OpenAPI description (scripts/openai-openapi.sh
installs both the pinned spec and this script's dependencies, jsonschema and PyYAML).

    openapi_validate.py SPEC SAMPLES.json     # the contract test's batch: JSON out
    openapi_validate.py SPEC SCHEMA [BODY]    # one body (a file, or stdin): text out

SAMPLES.json is a list of {"label", "body"} with either "schema" (a component name, e.g.
"ErrorResponse") or "operation" ("POST /responses") and "media" ("application/json" or
"text/event-stream"): the schema is then the one that operation's 200 answer names. The
batch prints {"spec": {...}, "results": [{"label", "schema", "errors": [{"pointer",
"reason", "detail"}]}]}; pointers have their array indices as `*`.

The document is OpenAPI 3.1 (JSON Schema 2020-12), with two leftovers handled here:
`nullable: true` (an OpenAPI 3.0 keyword that 2020-12 ignores) allows null, and unions
whose every branch requires a `type` of one value are checked by that value (the
`discriminator` idea), so an event or item is checked against its own schema and the
error names its field instead of "matches none of 60 schemas".
"""

import json
import sys

import jsonschema
import referencing
import yaml

BASE = "urn:openai-openapi"


class _Loader(yaml.CSafeLoader if hasattr(yaml, "CSafeLoader") else yaml.SafeLoader):
    """YAML without timestamps: a date in an enum or example stays the string it is."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in _Loader.yaml_implicit_resolvers.items()
}


def load_spec(path):
    with open(path, encoding="utf-8") as f:
        return yaml.load(f, Loader=_Loader)


def _ref_name(schema):
    ref = schema.get("$ref", "") if isinstance(schema, dict) else ""
    prefix = "#/components/schemas/"
    return ref[len(prefix):] if ref.startswith(prefix) else None


def _tag_of(schema, schemas, prop):
    """The single value `prop` must have in `schema` (followed through `$ref`), if the
    schema requires it; else None."""
    seen = 0
    while isinstance(schema, dict) and _ref_name(schema) and seen < 10:
        schema, seen = schemas.get(_ref_name(schema)), seen + 1
    if not isinstance(schema, dict) or prop not in schema.get("required", []):
        return None
    spec = schema.get("properties", {}).get(prop, {})
    if "const" in spec:
        return spec["const"]
    values = spec.get("enum")
    return values[0] if isinstance(values, list) and len(values) == 1 else None


def _discriminated(union, schemas, prop):
    """`union` (anyOf/oneOf branches) as a check by `prop`'s value, or None when some
    branch does not require a single value of it."""
    groups = {}
    for branch in union:
        tag = _tag_of(branch, schemas, prop)
        if not isinstance(tag, str):
            return None
        groups.setdefault(tag, []).append(branch)
    return {
        "type": "object",
        "required": [prop],
        "properties": {prop: {"enum": sorted(groups)}},
        "allOf": [
            {
                "if": {"properties": {prop: {"const": tag}}},
                "then": branches[0] if len(branches) == 1 else {"anyOf": branches},
            }
            for tag, branches in sorted(groups.items())
        ],
    }


def normalise(node, schemas):
    """The schema tree with `nullable` and discriminated unions rewritten (see above)."""
    if isinstance(node, list):
        return [normalise(n, schemas) for n in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key in ("example", "examples", "x-oaiMeta", "description"):
            continue
        if key == "properties" and isinstance(value, dict):
            out[key] = {name: normalise(v, schemas) for name, v in value.items()}
        else:
            out[key] = normalise(value, schemas)
    for key in ("anyOf", "oneOf"):
        union = out.get(key)
        if isinstance(union, list) and len(union) > 1:
            prop = node.get("discriminator", {}).get("propertyName", "type")
            rewritten = _discriminated(union, schemas, prop)
            if rewritten is not None:
                del out[key]
                out.setdefault("allOf", []).append(rewritten)
    if out.pop("nullable", False) is True:
        out = {"anyOf": [out, {"type": "null"}]}
    return out


class Spec:
    def __init__(self, path):
        doc = load_spec(path)
        schemas = doc["components"]["schemas"]
        self.info = doc.get("info", {})
        self.paths = doc.get("paths", {})
        self.schemas = schemas
        root = {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "components": {"schemas": {n: normalise(s, schemas) for n, s in schemas.items()}},
        }
        resource = referencing.Resource.from_contents(
            root, default_specification=referencing.jsonschema.DRAFT202012
        )
        self.registry = referencing.Registry().with_resource(BASE, resource)
        self._validators = {}

    def schema_of(self, operation, media):
        method, path = operation.split(" ", 1)
        op = self.paths.get(path, {}).get(method.lower())
        if op is None:
            raise KeyError(f"the spec has no operation {operation}")
        content = op.get("responses", {}).get("200", {}).get("content", {})
        name = _ref_name(content.get(media, {}).get("schema", {}))
        if name is None:
            raise KeyError(f"{operation} names no {media} schema for its 200 answer")
        return name

    def validator(self, name):
        if name not in self.schemas:
            raise KeyError(f"the spec has no schema {name}")
        if name not in self._validators:
            schema = {"$ref": f"{BASE}#/components/schemas/{name}"}
            self._validators[name] = jsonschema.Draft202012Validator(
                schema, registry=self.registry
            )
        return self._validators[name]

    def errors(self, name, body):
        found = []
        for error in self.validator(name).iter_errors(body):
            found.append(describe(deepest(error)))
        return sorted({(e["pointer"], e["reason"]): e for e in found}.values(),
                      key=lambda e: (e["pointer"], e["reason"]))


def deepest(error):
    """The most telling error under a failed union: the branch that got furthest."""
    while error.context:
        error = jsonschema.exceptions.best_match(error.context)
    return error


def json_type(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def describe(error):
    pointer = "".join(
        "/*" if isinstance(p, int) else "/" + str(p).replace("~", "~0").replace("/", "~1")
        for p in error.absolute_path
    )
    kind, want, got = error.validator, error.validator_value, error.instance
    if kind == "type":
        reason = f"type: {json_type(got)}, the schema wants {want}"
    elif kind == "enum":
        reason = f"enum: {json.dumps(got)} is not one of the schema's values"
    elif kind == "const":
        reason = f"const: {json.dumps(got)}, the schema wants {json.dumps(want)}"
    elif kind in ("required", "additionalProperties", "minItems", "maxItems"):
        reason = f"{kind}: {error.message}"
    elif kind in ("anyOf", "oneOf"):
        reason = f"{kind}: matches none of its {len(want)} schemas"
    else:
        reason = f"{kind}: {error.message[:160]}"
    detail = error.message if len(error.message) <= 400 else error.message[:400] + "…"
    return {"pointer": pointer, "reason": reason, "detail": detail}


def batch(spec, samples_path):
    with open(samples_path, encoding="utf-8") as f:
        samples = json.load(f)
    results = []
    for sample in samples:
        name = sample.get("schema") or spec.schema_of(sample["operation"], sample["media"])
        results.append({
            "label": sample["label"],
            "schema": name,
            "errors": spec.errors(name, sample["body"]),
        })
    info = {"title": spec.info.get("title"), "version": spec.info.get("version")}
    json.dump({"spec": info, "results": results}, sys.stdout)
    print()


def one(spec, name, body_path):
    text = open(body_path, encoding="utf-8").read() if body_path else sys.stdin.read()
    errors = spec.errors(name, json.loads(text))
    for e in errors:
        print(f"{e['pointer'] or '/'}: {e['reason']}\n    {e['detail']}")
    print(f"{name}: {'valid' if not errors else f'{len(errors)} error(s)'}")
    return 1 if errors else 0


def main(argv):
    if len(argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    spec = Spec(argv[1])
    if argv[2].endswith(".json") and len(argv) == 3:
        batch(spec, argv[2])
        return 0
    return one(spec, argv[2], argv[3] if len(argv) == 4 else None)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
