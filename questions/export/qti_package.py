"""The IMS content package around the QTI 2.1 items: ``imsmanifest.xml`` plus one file per item,
written as a zip (``--output bank.zip``, or in memory for a download) or a directory."""
from __future__ import annotations

import io
import os
import xml.etree.ElementTree as ET
import zipfile

from .qti import QTI_NS, item_xml

CP_NS = "http://www.imsglobal.org/xsd/imscp_v1p1"


def manifest_xml(instances: list[dict], lang: str) -> bytes:
    ET.register_namespace("", CP_NS)
    root = ET.Element(f"{{{CP_NS}}}manifest", {"identifier": f"MANIFEST_attn_grader_{lang}"})
    meta = ET.SubElement(root, f"{{{CP_NS}}}metadata")
    ET.SubElement(meta, f"{{{CP_NS}}}schema").text = "QTIv2.1 Package"
    ET.SubElement(meta, f"{{{CP_NS}}}schemaversion").text = "1.0.0"
    ET.SubElement(root, f"{{{CP_NS}}}organizations")
    resources = ET.SubElement(root, f"{{{CP_NS}}}resources")
    for inst in instances:
        href = f"items/{inst['id']}.xml"
        res = ET.SubElement(resources, f"{{{CP_NS}}}resource", {
            "identifier": "RES_" + inst["id"].replace("-", "_"), "type": "imsqti_item_xmlv2p1", "href": href})
        ET.SubElement(res, f"{{{CP_NS}}}file", {"href": href})
    ET.indent(root)
    data = b'<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="utf-8", xml_declaration=False)
    ET.register_namespace("", QTI_NS)
    return data


def qti_files(instances: list[dict], lang: str) -> dict[str, bytes]:
    files = {"imsmanifest.xml": manifest_xml(instances, lang)}
    for inst in instances:
        files[f"items/{inst['id']}.xml"] = item_xml(inst)
    return files


def qti_zip(instances: list[dict], lang: str) -> bytes:
    """The content package as one zip (what an LMS's QTI import takes), in memory."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in qti_files(instances, lang).items():
            zf.writestr(name, data)
    return buf.getvalue()


def write_qti(instances: list[dict], output: str, lang: str) -> str:
    """Write a zip when ``output`` ends in .zip, else a directory; returns the path."""
    if output.endswith(".zip"):
        with open(output, "wb") as f:
            f.write(qti_zip(instances, lang))
        return output
    files = qti_files(instances, lang)
    for name, data in files.items():
        path = os.path.join(output, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    return output
