// What libtickrail.so exports: the declarations marked TICKRAIL_API (the library is built with
// hidden visibility, so anything unmarked stays inside it).
#pragma once

#define TICKRAIL_API [[gnu::visibility("default")]]
