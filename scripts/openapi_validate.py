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


def _facts(schema, schemas, prop, depth=0):
    """Whether `schema` (through `$ref` and `allOf`) requires `prop`, and the values it
    allows it (None: any)."""
    if depth > 20 or not isinstance(schema, dict):
        return False, None
    if _ref_name(schema):
        return _facts(schemas.get(_ref_name(schema)), schemas, prop, depth + 1)
    required = prop in schema.get("required", [])
    spec = schema.get("properties", {}).get(prop, {})
    values = [spec["const"]] if "const" in spec else spec.get("enum")
    for part in schema.get("allOf", []):
        part_required, part_values = _facts(part, schemas, prop, depth + 1)
        required = required or part_required
        values = values if values is not None else part_values
    return required, values


def _tag_of(schema, schemas, prop):
    """The single value `prop` must have in `schema`, if the schema requires it; else None."""
    required, values = _facts(schema, schemas, prop)
    if required and isinstance(values, list) and len(values) == 1:
        return values[0]
    return None


def _any(branches):
    return branches[0] if len(branches) == 1 else {"anyOf": branches}


def _discriminated(union, schemas, prop):
    """`union` (anyOf/oneOf branches) checked by `prop`'s value: a value's branches, plus
    the branches that do not require one value of it; None when no branch has a value."""
    groups, untagged = {}, []
    for branch in union:
        tag = _tag_of(branch, schemas, prop)
        if isinstance(tag, str):
            groups.setdefault(tag, []).append(branch)
        else:
            untagged.append(branch)
    if not groups:
        return None
    tags = sorted(groups)
    if not untagged:
        return {
            "type": "object",
            "required": [prop],
            "properties": {prop: {"enum": tags}},
            "allOf": [
                {"if": {"properties": {prop: {"const": tag}}}, "then": _any(groups[tag])}
                for tag in tags
            ],
        }
    tagged = {"type": "object", "required": [prop]}
    return {
        "allOf": [
            {"if": dict(tagged, properties={prop: {"const": tag}}),
             "then": _any(groups[tag] + untagged)}
            for tag in tags
        ] + [
            {"if": {"not": dict(tagged, properties={prop: {"enum": tags}})},
             "then": _any(untagged)}
        ]
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


def _other_kind(errors):
    """Whether a union branch failed only at the door: the instance is another JSON type,
    or another `type` of item or event."""
    return any(
        (e.validator == "type" and not e.relative_path)
        or (e.validator in ("const", "enum") and list(e.relative_path) == ["type"])
        for e in errors
    )


def deepest(error):
    """The most telling error under a failed union: among the branches of the instance's
    own kind, the one that got furthest."""
    while error.context:
        branches = {}
        for e in error.context:
            branches.setdefault(e.schema_path[0] if e.schema_path else None, []).append(e)
        same_kind = [e for errs in branches.values() if not _other_kind(errs) for e in errs]
        error = jsonschema.exceptions.best_match(same_kind or error.context)
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
