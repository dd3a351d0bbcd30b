"""The Python SDK over gRPC: Client, Producer, Consumer, Reader (blocking and asyncio).

``magnetar.Client`` is the blocking client (:mod:`.sync`); ``magnetar.asyncio`` is the
asyncio one (:mod:`.aio`). Both have the names and signatures of Pulsar's Python client,
and each module's ``__all__`` lists its public names.
"""
