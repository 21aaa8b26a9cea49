"""The S3-compatible backend (AWS, SeaweedFS, MinIO, ...) through boto3. Large objects go up
as multipart uploads (aborted on failure, so no partial object is ever visible)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any

from store.offload.backend import ObjectInfo

PART_BYTES = 16 << 20  # S3 needs >= 5 MiB for every part but the last


class S3Backend:
    driver = "s3"

    def __init__(
        self,
        bucket: str,
        *,
        endpoint: str | None = None,
        prefix: str = "",
        region: str | None = None,
        access_key: str | None = None,
        secret_key: str | None = None,
        max_connections: int = 16,
        max_attempts: int = 8,
        create_bucket: bool = True,
    ) -> None:
        """max_attempts: boto3's tries of one call (its standard retry mode) before the caller
        sees the error; the offloader retries a failed ledger on its own, with its own backoff."""
        import boto3
        from botocore.config import Config

        self.bucket = bucket
        self.prefix = prefix.strip("/") + "/" if prefix.strip("/") else ""
        cfg = Config(
            max_pool_connections=max_connections,
            retries={"max_attempts": max_attempts, "mode": "standard"},  # 500s/503s under load are retryable
            connect_timeout=5,
            read_timeout=30,
            s3={"addressing_style": "path"},
        )
        # Credentials not given fall back to boto3's usual chain (AWS_ACCESS_KEY_ID, profiles, ...).
        self._s3: Any = boto3.session.Session().client(
            "s3",
            endpoint_url=endpoint or None,
            region_name=region or "us-east-1",
            aws_access_key_id=access_key or None,
            aws_secret_access_key=secret_key or None,
            config=cfg,
        )
        if create_bucket:
            self._ensure_bucket()

    def _ensure_bucket(self) -> None:
        from botocore.exceptions import ClientError

        try:
            self._s3.head_bucket(Bucket=self.bucket)
        except ClientError:
            with contextlib.suppress(ClientError):
                self._s3.create_bucket(Bucket=self.bucket)

    def _k(self, key: str) -> str:
        return self.prefix + key

    def put_stream(self, key: str, parts: Iterable[bytes]) -> int:
        buf = bytearray()
        it = iter(parts)
        upload_id: str | None = None
        done: list[dict[str, Any]] = []
        total = 0
        try:
            for part in it:
                buf += part
                total += len(part)
                while len(buf) >= PART_BYTES:
                    if upload_id is None:
                        upload_id = self._s3.create_multipart_upload(Bucket=self.bucket, Key=self._k(key))["UploadId"]
                    chunk, buf = bytes(buf[:PART_BYTES]), buf[PART_BYTES:]
                    n = len(done) + 1
                    r = self._s3.upload_part(
                        Bucket=self.bucket, Key=self._k(key), UploadId=upload_id, PartNumber=n, Body=chunk
                    )
                    done.append({"PartNumber": n, "ETag": r["ETag"]})
            if upload_id is None:
                self._s3.put_object(Bucket=self.bucket, Key=self._k(key), Body=bytes(buf))
                return total
            if buf:
                n = len(done) + 1
                r = self._s3.upload_part(
                    Bucket=self.bucket, Key=self._k(key), UploadId=upload_id, PartNumber=n, Body=bytes(buf)
                )
                done.append({"PartNumber": n, "ETag": r["ETag"]})
            self._s3.complete_multipart_upload(
                Bucket=self.bucket, Key=self._k(key), UploadId=upload_id, MultipartUpload={"Parts": done}
            )
            return total
        except BaseException:
            if upload_id is not None:
                with contextlib.suppress(Exception):
                    self._s3.abort_multipart_upload(Bucket=self.bucket, Key=self._k(key), UploadId=upload_id)
            raise

    def put(self, key: str, data: bytes) -> None:
        self._s3.put_object(Bucket=self.bucket, Key=self._k(key), Body=data)

    def get(self, key: str) -> bytes:
        data: bytes = self._s3.get_object(Bucket=self.bucket, Key=self._k(key))["Body"].read()
        return data

    def get_range(self, key: str, start: int, end: int) -> bytes:
        if end <= start:
            return b""
        r = self._s3.get_object(Bucket=self.bucket, Key=self._k(key), Range=f"bytes={start}-{end - 1}")
        data: bytes = r["Body"].read()
        return data

    def size(self, key: str) -> int:
        return int(self._s3.head_object(Bucket=self.bucket, Key=self._k(key))["ContentLength"])

    def delete(self, key: str) -> None:
        self._s3.delete_object(Bucket=self.bucket, Key=self._k(key))

    def list_objects(self, prefix: str) -> list[ObjectInfo]:
        out: list[ObjectInfo] = []
        pages = self._s3.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=self._k(prefix))
        for page in pages:
            for o in page.get("Contents", []):
                key = str(o["Key"])[len(self.prefix):]
                out.append(ObjectInfo(key, int(o["Size"]), int(o["LastModified"].timestamp() * 1000)))
        return out

    def abort_incomplete(self, prefix: str, cutoff_ms: int) -> list[str]:
        out: list[str] = []
        pages = self._s3.get_paginator("list_multipart_uploads").paginate(Bucket=self.bucket, Prefix=self._k(prefix))
        for page in pages:
            for u in page.get("Uploads", []):
                if int(u["Initiated"].timestamp() * 1000) <= cutoff_ms:
                    with contextlib.suppress(Exception):
                        self._s3.abort_multipart_upload(Bucket=self.bucket, Key=u["Key"], UploadId=u["UploadId"])
                        out.append(str(u["Key"])[len(self.prefix):])
        return out

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self._s3.close()
