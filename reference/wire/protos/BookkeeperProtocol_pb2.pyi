from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from typing import ClassVar as _ClassVar, Iterable as _Iterable, Mapping as _Mapping, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ProtocolVersion(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    VERSION_ONE: _ClassVar[ProtocolVersion]
    VERSION_TWO: _ClassVar[ProtocolVersion]
    VERSION_THREE: _ClassVar[ProtocolVersion]

class StatusCode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EOK: _ClassVar[StatusCode]
    ENOLEDGER: _ClassVar[StatusCode]
    ENOENTRY: _ClassVar[StatusCode]
    EBADREQ: _ClassVar[StatusCode]
    EIO: _ClassVar[StatusCode]
    EUA: _ClassVar[StatusCode]
    EBADVERSION: _ClassVar[StatusCode]
    EFENCED: _ClassVar[StatusCode]
    EREADONLY: _ClassVar[StatusCode]
    ETOOMANYREQUESTS: _ClassVar[StatusCode]
    EUNKNOWNLEDGERSTATE: _ClassVar[StatusCode]

class OperationType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    READ_ENTRY: _ClassVar[OperationType]
    ADD_ENTRY: _ClassVar[OperationType]
    RANGE_READ_ENTRY: _ClassVar[OperationType]
    RANGE_ADD_ENTRY: _ClassVar[OperationType]
    AUTH: _ClassVar[OperationType]
    WRITE_LAC: _ClassVar[OperationType]
    READ_LAC: _ClassVar[OperationType]
    GET_BOOKIE_INFO: _ClassVar[OperationType]
    START_TLS: _ClassVar[OperationType]
    FORCE_LEDGER: _ClassVar[OperationType]
    GET_LIST_OF_ENTRIES_OF_LEDGER: _ClassVar[OperationType]
    BATCH_READ_ENTRY: _ClassVar[OperationType]
VERSION_ONE: ProtocolVersion
VERSION_TWO: ProtocolVersion
VERSION_THREE: ProtocolVersion
EOK: StatusCode
ENOLEDGER: StatusCode
ENOENTRY: StatusCode
EBADREQ: StatusCode
EIO: StatusCode
EUA: StatusCode
EBADVERSION: StatusCode
EFENCED: StatusCode
EREADONLY: StatusCode
ETOOMANYREQUESTS: StatusCode
EUNKNOWNLEDGERSTATE: StatusCode
READ_ENTRY: OperationType
ADD_ENTRY: OperationType
RANGE_READ_ENTRY: OperationType
RANGE_ADD_ENTRY: OperationType
AUTH: OperationType
WRITE_LAC: OperationType
READ_LAC: OperationType
GET_BOOKIE_INFO: OperationType
START_TLS: OperationType
FORCE_LEDGER: OperationType
GET_LIST_OF_ENTRIES_OF_LEDGER: OperationType
BATCH_READ_ENTRY: OperationType

class BKPacketHeader(_message.Message):
    __slots__ = ("version", "operation", "txnId", "priority")
    VERSION_FIELD_NUMBER: _ClassVar[int]
    OPERATION_FIELD_NUMBER: _ClassVar[int]
    TXNID_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    version: ProtocolVersion
    operation: OperationType
    txnId: int
    priority: int
    def __init__(self, version: _Optional[_Union[ProtocolVersion, str]] = ..., operation: _Optional[_Union[OperationType, str]] = ..., txnId: _Optional[int] = ..., priority: _Optional[int] = ...) -> None: ...

class ContextPair(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class Request(_message.Message):
    __slots__ = ("header", "readRequest", "addRequest", "authRequest", "writeLacRequest", "readLacRequest", "getBookieInfoRequest", "startTLSRequest", "forceLedgerRequest", "getListOfEntriesOfLedgerRequest", "requestContext")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    READREQUEST_FIELD_NUMBER: _ClassVar[int]
    ADDREQUEST_FIELD_NUMBER: _ClassVar[int]
    AUTHREQUEST_FIELD_NUMBER: _ClassVar[int]
    WRITELACREQUEST_FIELD_NUMBER: _ClassVar[int]
    READLACREQUEST_FIELD_NUMBER: _ClassVar[int]
    GETBOOKIEINFOREQUEST_FIELD_NUMBER: _ClassVar[int]
    STARTTLSREQUEST_FIELD_NUMBER: _ClassVar[int]
    FORCELEDGERREQUEST_FIELD_NUMBER: _ClassVar[int]
    GETLISTOFENTRIESOFLEDGERREQUEST_FIELD_NUMBER: _ClassVar[int]
    REQUESTCONTEXT_FIELD_NUMBER: _ClassVar[int]
    header: BKPacketHeader
    readRequest: ReadRequest
    addRequest: AddRequest
    authRequest: AuthMessage
    writeLacRequest: WriteLacRequest
    readLacRequest: ReadLacRequest
    getBookieInfoRequest: GetBookieInfoRequest
    startTLSRequest: StartTLSRequest
    forceLedgerRequest: ForceLedgerRequest
    getListOfEntriesOfLedgerRequest: GetListOfEntriesOfLedgerRequest
    requestContext: _containers.RepeatedCompositeFieldContainer[ContextPair]
    def __init__(self, header: _Optional[_Union[BKPacketHeader, _Mapping]] = ..., readRequest: _Optional[_Union[ReadRequest, _Mapping]] = ..., addRequest: _Optional[_Union[AddRequest, _Mapping]] = ..., authRequest: _Optional[_Union[AuthMessage, _Mapping]] = ..., writeLacRequest: _Optional[_Union[WriteLacRequest, _Mapping]] = ..., readLacRequest: _Optional[_Union[ReadLacRequest, _Mapping]] = ..., getBookieInfoRequest: _Optional[_Union[GetBookieInfoRequest, _Mapping]] = ..., startTLSRequest: _Optional[_Union[StartTLSRequest, _Mapping]] = ..., forceLedgerRequest: _Optional[_Union[ForceLedgerRequest, _Mapping]] = ..., getListOfEntriesOfLedgerRequest: _Optional[_Union[GetListOfEntriesOfLedgerRequest, _Mapping]] = ..., requestContext: _Optional[_Iterable[_Union[ContextPair, _Mapping]]] = ...) -> None: ...

class ReadRequest(_message.Message):
    __slots__ = ("flag", "ledgerId", "entryId", "masterKey", "previousLAC", "timeOut")
    class Flag(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        FENCE_LEDGER: _ClassVar[ReadRequest.Flag]
        ENTRY_PIGGYBACK: _ClassVar[ReadRequest.Flag]
    FENCE_LEDGER: ReadRequest.Flag
    ENTRY_PIGGYBACK: ReadRequest.Flag
    FLAG_FIELD_NUMBER: _ClassVar[int]
    LEDGERID_FIELD_NUMBER: _ClassVar[int]
    ENTRYID_FIELD_NUMBER: _ClassVar[int]
    MASTERKEY_FIELD_NUMBER: _ClassVar[int]
    PREVIOUSLAC_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    flag: ReadRequest.Flag
    ledgerId: int
    entryId: int
    masterKey: bytes
    previousLAC: int
    timeOut: int
    def __init__(self, flag: _Optional[_Union[ReadRequest.Flag, str]] = ..., ledgerId: _Optional[int] = ..., entryId: _Optional[int] = ..., masterKey: _Optional[bytes] = ..., previousLAC: _Optional[int] = ..., timeOut: _Optional[int] = ...) -> None: ...

class AddRequest(_message.Message):
    __slots__ = ("flag", "ledgerId", "entryId", "masterKey", "body", "writeFlags")
    class Flag(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        RECOVERY_ADD: _ClassVar[AddRequest.Flag]
    RECOVERY_ADD: AddRequest.Flag
    FLAG_FIELD_NUMBER: _ClassVar[int]
    LEDGERID_FIELD_NUMBER: _ClassVar[int]
    ENTRYID_FIELD_NUMBER: _ClassVar[int]
    MASTERKEY_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    WRITEFLAGS_FIELD_NUMBER: _ClassVar[int]
    flag: AddRequest.Flag
    ledgerId: int
    entryId: int
    masterKey: bytes
    body: bytes
    writeFlags: int
    def __init__(self, flag: _Optional[_Union[AddRequest.Flag, str]] = ..., ledgerId: _Optional[int] = ..., entryId: _Optional[int] = ..., masterKey: _Optional[bytes] = ..., body: _Optional[bytes] = ..., writeFlags: _Optional[int] = ...) -> None: ...

class StartTLSRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class WriteLacRequest(_message.Message):
    __slots__ = ("ledgerId", "lac", "masterKey", "body")
    LEDGERID_FIELD_NUMBER: _ClassVar[int]
    LAC_FIELD_NUMBER: _ClassVar[int]
    MASTERKEY_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    ledgerId: int
    lac: int
    masterKey: bytes
    body: bytes
    def __init__(self, ledgerId: _Optional[int] = ..., lac: _Optional[int] = ..., masterKey: _Optional[bytes] = ..., body: _Optional[bytes] = ...) -> None: ...

class ForceLedgerRequest(_message.Message):
    __slots__ = ("ledgerId",)
    LEDGERID_FIELD_NUMBER: _ClassVar[int]
    ledgerId: int
    def __init__(self, ledgerId: _Optional[int] = ...) -> None: ...

class ReadLacRequest(_message.Message):
    __slots__ = ("ledgerId",)
    LEDGERID_FIELD_NUMBER: _ClassVar[int]
    ledgerId: int
    def __init__(self, ledgerId: _Optional[int] = ...) -> None: ...

class GetBookieInfoRequest(_message.Message):
    __slots__ = ("requested",)
    class Flags(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        TOTAL_DISK_CAPACITY: _ClassVar[GetBookieInfoRequest.Flags]
        FREE_DISK_SPACE: _ClassVar[GetBookieInfoRequest.Flags]
    TOTAL_DISK_CAPACITY: GetBookieInfoRequest.Flags
    FREE_DISK_SPACE: GetBookieInfoRequest.Flags
    REQUESTED_FIELD_NUMBER: _ClassVar[int]
    requested: int
    def __init__(self, requested: _Optional[int] = ...) -> None: ...

class GetListOfEntriesOfLedgerRequest(_message.Message):
    __slots__ = ("ledgerId",)
    LEDGERID_FIELD_NUMBER: _ClassVar[int]
    ledgerId: int
    def __init__(self, ledgerId: _Optional[int] = ...) -> None: ...

class Response(_message.Message):
    __slots__ = ("header", "status", "readResponse", "addResponse", "authResponse", "writeLacResponse", "readLacResponse", "getBookieInfoResponse", "startTLSResponse", "forceLedgerResponse", "getListOfEntriesOfLedgerResponse")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    READRESPONSE_FIELD_NUMBER: _ClassVar[int]
    ADDRESPONSE_FIELD_NUMBER: _ClassVar[int]
    AUTHRESPONSE_FIELD_NUMBER: _ClassVar[int]
    WRITELACRESPONSE_FIELD_NUMBER: _ClassVar[int]
    READLACRESPONSE_FIELD_NUMBER: _ClassVar[int]
    GETBOOKIEINFORESPONSE_FIELD_NUMBER: _ClassVar[int]
    STARTTLSRESPONSE_FIELD_NUMBER: _ClassVar[int]
    FORCELEDGERRESPONSE_FIELD_NUMBER: _ClassVar[int]
    GETLISTOFENTRIESOFLEDGERRESPONSE_FIELD_NUMBER: _ClassVar[int]
    header: BKPacketHeader
    status: StatusCode
    readResponse: ReadResponse
    addResponse: AddResponse
    authResponse: AuthMessage
    writeLacResponse: WriteLacResponse
    readLacResponse: ReadLacResponse
    getBookieInfoResponse: GetBookieInfoResponse
    startTLSResponse: StartTLSResponse
    forceLedgerResponse: ForceLedgerResponse
    getListOfEntriesOfLedgerResponse: GetListOfEntriesOfLedgerResponse
    def __init__(self, header: _Optional[_Union[BKPacketHeader, _Mapping]] = ..., status: _Optional[_Union[StatusCode, str]] = ..., readResponse: _Optional[_Union[ReadResponse, _Mapping]] = ..., addResponse: _Optional[_Union[AddResponse, _Mapping]] = ..., authResponse: _Optional[_Union[AuthMessage, _Mapping]] = ..., writeLacResponse: _Optional[_Union[WriteLacResponse, _Mapping]] = ..., readLacResponse: _Optional[_Union[ReadLacResponse, _Mapping]] = ..., getBookieInfoResponse: _Optional[_Union[GetBookieInfoResponse, _Mapping]] = ..., startTLSResponse: _Optional[_Union[StartTLSResponse, _Mapping]] = ..., forceLedgerResponse: _Optional[_Union[ForceLedgerResponse, _Mapping]] = ..., getListOfEntriesOfLedgerResponse: _Optional[_Union[GetListOfEntriesOfLedgerResponse, _Mapping]] = ...) -> None: ...

class ReadResponse(_message.Message):
    __slots__ = ("status", "ledgerId", "entryId", "body", "maxLAC", "lacUpdateTimestamp")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    LEDGERID_FIELD_NUMBER: _ClassVar[int]
    ENTRYID_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    MAXLAC_FIELD_NUMBER: _ClassVar[int]
    LACUPDATETIMESTAMP_FIELD_NUMBER: _ClassVar[int]
    status: StatusCode
    ledgerId: int
    entryId: int
    body: bytes
    maxLAC: int
    lacUpdateTimestamp: int
    def __init__(self, status: _Optional[_Union[StatusCode, str]] = ..., ledgerId: _Optional[int] = ..., entryId: _Optional[int] = ..., body: _Optional[bytes] = ..., maxLAC: _Optional[int] = ..., lacUpdateTimestamp: _Optional[int] = ...) -> None: ...

class AddResponse(_message.Message):
    __slots__ = ("status", "ledgerId", "entryId")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    LEDGERID_FIELD_NUMBER: _ClassVar[int]
    ENTRYID_FIELD_NUMBER: _ClassVar[int]
    status: StatusCode
    ledgerId: int
    entryId: int
    def __init__(self, status: _Optional[_Union[StatusCode, str]] = ..., ledgerId: _Optional[int] = ..., entryId: _Optional[int] = ...) -> None: ...

class AuthMessage(_message.Message):
    __slots__ = ("authPluginName", "payload")
    AUTHPLUGINNAME_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_FIELD_NUMBER: _ClassVar[int]
    authPluginName: str
    payload: bytes
    def __init__(self, authPluginName: _Optional[str] = ..., payload: _Optional[bytes] = ...) -> None: ...

class WriteLacResponse(_message.Message):
    __slots__ = ("status", "ledgerId")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    LEDGERID_FIELD_NUMBER: _ClassVar[int]
    status: StatusCode
    ledgerId: int
    def __init__(self, status: _Optional[_Union[StatusCode, str]] = ..., ledgerId: _Optional[int] = ...) -> None: ...

class ForceLedgerResponse(_message.Message):
    __slots__ = ("status", "ledgerId")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    LEDGERID_FIELD_NUMBER: _ClassVar[int]
    status: StatusCode
    ledgerId: int
    def __init__(self, status: _Optional[_Union[StatusCode, str]] = ..., ledgerId: _Optional[int] = ...) -> None: ...

class ReadLacResponse(_message.Message):
    __slots__ = ("status", "ledgerId", "lacBody", "lastEntryBody")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    LEDGERID_FIELD_NUMBER: _ClassVar[int]
    LACBODY_FIELD_NUMBER: _ClassVar[int]
    LASTENTRYBODY_FIELD_NUMBER: _ClassVar[int]
    status: StatusCode
    ledgerId: int
    lacBody: bytes
    lastEntryBody: bytes
    def __init__(self, status: _Optional[_Union[StatusCode, str]] = ..., ledgerId: _Optional[int] = ..., lacBody: _Optional[bytes] = ..., lastEntryBody: _Optional[bytes] = ...) -> None: ...

class GetBookieInfoResponse(_message.Message):
    __slots__ = ("status", "totalDiskCapacity", "freeDiskSpace")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    TOTALDISKCAPACITY_FIELD_NUMBER: _ClassVar[int]
    FREEDISKSPACE_FIELD_NUMBER: _ClassVar[int]
    status: StatusCode
    totalDiskCapacity: int
    freeDiskSpace: int
    def __init__(self, status: _Optional[_Union[StatusCode, str]] = ..., totalDiskCapacity: _Optional[int] = ..., freeDiskSpace: _Optional[int] = ...) -> None: ...

class GetListOfEntriesOfLedgerResponse(_message.Message):
    __slots__ = ("status", "ledgerId", "availabilityOfEntriesOfLedger")
    STATUS_FIELD_NUMBER: _ClassVar[int]
    LEDGERID_FIELD_NUMBER: _ClassVar[int]
    AVAILABILITYOFENTRIESOFLEDGER_FIELD_NUMBER: _ClassVar[int]
    status: StatusCode
    ledgerId: int
    availabilityOfEntriesOfLedger: bytes
    def __init__(self, status: _Optional[_Union[StatusCode, str]] = ..., ledgerId: _Optional[int] = ..., availabilityOfEntriesOfLedger: _Optional[bytes] = ...) -> None: ...

class StartTLSResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
